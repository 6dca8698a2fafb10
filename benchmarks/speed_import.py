"""The ``import`` part of ``benchmarks/speed.py``: ``python -m qa_core data import`` of WikiQA into a
fresh SQLite store and a fresh database of a throwaway PostgreSQL server, process start included."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import ROOT, load_note, wikiqa_path


@contextlib.contextmanager
def postgres_server() -> Iterator[str | None]:
    """A throwaway PostgreSQL cluster as tests/conftest.py starts one; None when the binaries are missing."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not bins:
        yield None
        return
    bin_dir = bins[-1].parent
    root = Path(tempfile.mkdtemp(prefix="speed_pg_"))
    as_user = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, user="postgres")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data = root / "data"
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"
    try:
        subprocess.run([*as_user, bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                       check=True, capture_output=True)
        subprocess.run([*as_user, bin_dir / "pg_ctl", "-D", data, "-l", root / "log", "-o", options, "-w", "start"],
                       check=True, capture_output=True)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_user, bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def time_cli_import(url: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "qa_core", "--db", url, "data", "import", str(wikiqa_path()), "--name", "wikiqa"],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def run_import(repeats: int = 3) -> dict[str, Any]:
    """``python -m qa_core data import`` of the WikiQA folder into a fresh store, process start included."""
    from sqlalchemy import create_engine, text

    env = {**os.environ}
    folder = Path(env["RERANK_LAB_DATA"])
    result: dict[str, Any] = {"sqlite_s": [time_cli_import(f"sqlite:///{folder / f'import{i}.sqlite'}", env)
                                           for i in range(repeats)]}
    with postgres_server() as server:
        if server is None:
            result["postgresql_s"] = None
        else:
            admin = create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
            times = []
            for i in range(repeats):
                with admin.connect() as connection:
                    connection.execute(text(f"CREATE DATABASE import{i}"))  # generated name, no user input
                times.append(time_cli_import(f"{server}/import{i}", env))
            admin.dispose()
            result["postgresql_s"] = times
    return result


def render_import(imp: dict[str, Any]) -> list[str]:
    """The import's median seconds per store, every run in parentheses."""
    lines = ["### WikiQA import", "",
             "`python -m qa_core data import ../shared/data/wikiqa` into a fresh store (1,242 questions, "
             "12,153 candidates), process start included, WikiQA's case restored on import; median of the "
             f"runs (all runs in parentheses).{load_note(imp)}", "",
             "| store | seconds |", "|---|---|"]
    for name, key in (("SQLite (WAL)", "sqlite_s"), ("PostgreSQL (local, fsync on)", "postgresql_s")):
        runs = imp.get(key)
        cell = "not measured (no server)" if not runs else \
            f"{statistics.median(runs):.1f} ({', '.join(f'{r:.1f}' for r in runs)})"
        lines.append(f"| {name} | {cell} |")
    lines.append("")
    return lines
