"""Alembic environment: reuses the connection given by ``db.session.upgrade`` when there is one.

From the command line (``alembic -c db/alembic.ini ...``) it connects to ``RERANK_LAB_DB`` or the
default SQLite store. SQLite gets batch mode, since it cannot ALTER most things in place.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from db.models import Base
from db.session import make_engine, migrating

config = context.config
target_metadata = Base.metadata


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or str(make_engine().url),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
elif (given := config.attributes.get("connection")) is not None:
    run_migrations(given)
else:
    engine = make_engine(config.get_main_option("sqlalchemy.url") or None)
    try:
        with migrating(engine) as connection:
            run_migrations(connection)
    finally:
        engine.dispose()
