"""Shared pytest fixtures, one section per part of the project."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from db.store import Store

# ============================================================================ store / databases
# `database_url` runs each test twice: on a SQLite file and on a fresh database of a real
# PostgreSQL server started once per session from the Debian binaries. Without the binaries the
# PostgreSQL cases are skipped, unless CI=true or RERANK_LAB_REQUIRE_PG=1 makes that a failure.

PG_SUPERUSER = "postgres"


def _pg_required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("RERANK_LAB_REQUIRE_PG") == "1"


def _pg_unavailable(reason: str) -> None:
    if _pg_required():
        pytest.fail(f"PostgreSQL is required (CI / RERANK_LAB_REQUIRE_PG) but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def _pg_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has initdb and pg_ctl."""
    candidates = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    usable = [d for d in candidates if (d / "pg_ctl").exists()]
    return max(usable, key=lambda d: int(d.parent.name), default=None)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Start a throwaway PostgreSQL cluster on loopback; yield the URL of its maintenance database.

    initdb refuses to run as root, so as root the cluster belongs to the ``postgres`` user.
    """
    bin_dir = _pg_bin_dir()
    if bin_dir is None:
        _pg_unavailable("no /usr/lib/postgresql/*/bin/initdb found (apt-get install postgresql)")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="rerank_lab_pg_"))
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            _pg_unavailable("running as root and runuser is missing")
        as_user = ["runuser", "-u", PG_SUPERUSER, "--"]
        shutil.chown(root, user=PG_SUPERUSER)
    data_dir, log_file = root / "data", root / "server.log"
    port = _free_port()

    def run(*args: str) -> None:
        result = subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log = log_file.read_text() if log_file.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}{result.stderr}{log}")

    try:
        run(str(bin_dir / "initdb"), "-D", str(data_dir), "-U", PG_SUPERUSER, "--auth=trust", "-E", "UTF8")
        # Durability is irrelevant for a throwaway cluster; skipping fsync keeps the tests fast.
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
        run(str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-l", str(log_file), "-o", options, "-w", "start")
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        shutil.rmtree(root, ignore_errors=True)
        _pg_unavailable(f"the server did not start: {error}")
    try:
        yield f"postgresql+psycopg://{PG_SUPERUSER}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


_database_numbers = itertools.count(1)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database: a SQLite file, or a new database on the session's PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite'}"
        return
    server_url = make_url(request.getfixturevalue("postgres_server"))
    name = f"test_{os.getpid()}_{next(_database_numbers)}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            # CREATE/DROP DATABASE have no SQLAlchemy construct; the name is generated here.
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield server_url.set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    """A migrated ``Store`` on the parametrised back end."""
    instance = Store(database_url)
    yield instance
    instance.close()
