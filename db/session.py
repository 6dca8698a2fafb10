"""Engine creation (SQLite pragmas, PostgreSQL driver) and programmatic Alembic upgrades."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from qa_core.config import database_url

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def make_engine(url: str | None = None) -> Engine:
    """Engine for ``url`` (default: ``qa_core.config.database_url()``).

    SQLite connections get WAL (readers do not block the writer, so the app stays responsive
    while training writes runs), ``synchronous=NORMAL`` (the setting SQLite recommends with WAL:
    still corruption-proof and durable when a process crashes or is killed, but a commit waits
    for no fsync, which makes many small label writes several times faster; only a power cut or
    an OS crash can undo the last commits), a busy timeout instead of immediate "database is
    locked", and enforced foreign keys (SQLite ignores ON DELETE CASCADE without them).
    A bare ``postgresql://`` URL uses psycopg 3, the driver installed here.
    """
    parsed = make_url(url or database_url())
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    engine = create_engine(parsed)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas(in_memory=parsed.database in (None, "", ":memory:")))
    return engine


def _sqlite_pragmas(in_memory: bool) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    return on_connect


def alembic_config() -> Config:
    """Alembic configuration without an ini file, pointing at ``db/migrations``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run ``alembic upgrade`` on ``engine`` in one transaction (env.py reuses the connection)."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Run ``alembic downgrade`` to ``revision`` on ``engine`` in one transaction."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
