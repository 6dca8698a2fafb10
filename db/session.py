"""Engine creation (SQLite pragmas, PostgreSQL driver) and programmatic Alembic upgrades."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import Connection, Engine, create_engine, event, insert, inspect
from sqlalchemy.exc import OperationalError

from db.models import Base, StoreInfoRow, new_store_id
from qa_core.config import database_url, parse_database_url
from qa_core.types import InputError

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
    A bare ``postgresql://`` URL uses psycopg 3, the driver installed here; a URL whose driver is
    not installed (``mysql://`` without MySQLdb) is an ``InputError`` naming the missing module.
    """
    if url is not None and not url.strip():
        raise InputError("the database URL is empty; give one (sqlite:///path/to/file.sqlite, postgresql://...), "
                         "or none for the default store")
    parsed = parse_database_url(url or database_url())
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    try:
        engine = create_engine(parsed)
    except ImportError as error:
        raise InputError(
            f"the database URL's driver for {parsed.drivername!r} is not installed (no Python module "
            f"{error.name!r}); install it, or use sqlite:/// or postgresql:// (psycopg is installed)"
        ) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas(in_memory=parsed.database in (None, "", ":memory:")))
    return engine


def read_only_engine(engine: Engine) -> Engine | None:
    """The same SQLite file opened for reading only, when this process may not write it (its file
    or folder is read-only: SQLite then cannot even open it for writing, nor create its WAL index
    beside it), else ``None``. Reads work; every write is refused as "read-only" (``StorageError``).
    ``immutable`` only when a plain read-only open fails too (a WAL file without its index, which
    the read-only folder cannot get): nobody can write there meanwhile."""
    path = engine.url.database
    if engine.dialect.name != "sqlite" or path in (None, "", ":memory:") or not Path(path).is_file():
        return None
    if os.access(path, os.W_OK) and os.access(Path(path).parent, os.W_OK):
        return None
    for options in ("mode=ro", "mode=ro&immutable=1"):
        candidate = create_engine(f"sqlite:///file:{quote(str(Path(path).resolve()))}?{options}&uri=true")
        event.listen(candidate, "connect", _sqlite_pragmas(in_memory=False, read_only=True))
        try:
            with candidate.connect() as connection:
                connection.exec_driver_sql("SELECT count(*) FROM sqlite_master")
            return candidate
        except OperationalError:
            candidate.dispose()
    return None


def _sqlite_pragmas(in_memory: bool, read_only: bool = False) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory and not read_only:
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


@contextmanager
def migrating(engine: Engine) -> Iterator[Connection]:
    """A connection in one transaction for Alembic.

    On SQLite foreign keys are not enforced meanwhile: a batch migration re-creates a table (copy,
    drop, rename), and dropping it under enforcement runs the ON DELETE action of every row that
    refers to it, so CASCADE would delete labels and SET NULL would clear
    ``runs.model_version_id``. When the revision changed, ``PRAGMA foreign_key_check`` must find
    nothing before the commit. (The pragma is a no-op inside a transaction, hence before BEGIN.)
    """
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            with connection.begin():
                before = MigrationContext.configure(connection).get_current_revision()
                yield connection
                changed = MigrationContext.configure(connection).get_current_revision() != before
                if sqlite and changed:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise RuntimeError(f"the migration left rows with dangling foreign keys: {broken[:5]}")
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run ``alembic upgrade`` on ``engine`` in one transaction (env.py reuses the connection).

    An empty database going to head is instead created from the models and stamped head, Alembic's
    recipe for a new database: replaying every revision (SQLite's batch table copies among them)
    took 0.3 s for each new store, and the test suite opens hundreds. ``tests/test_store.py``
    checks that the migrations build the same schema.
    """
    config = alembic_config()
    with migrating(engine) as connection:
        config.attributes["connection"] = connection
        if revision == "head" and not inspect(connection).get_table_names():
            create_schema(connection)
            command.stamp(config, "head")
        else:
            command.upgrade(config, revision)


def create_schema(connection: Connection) -> None:
    """The head schema in an empty database, with the rows the migrations seed (the store's id)."""
    Base.metadata.create_all(connection)
    connection.execute(insert(StoreInfoRow).values(key="store_id", value=new_store_id()))


def downgrade(engine: Engine, revision: str) -> None:
    """Run ``alembic downgrade`` to ``revision`` on ``engine`` in one transaction."""
    config = alembic_config()
    with migrating(engine) as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
