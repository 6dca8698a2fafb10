"""Where things live: data folder, database URL, the shared benchmark data."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """Folder for the SQLite store, checkpoints and caches (``RERANK_LAB_DATA``, default ``./data``)."""
    path = Path(os.environ.get("RERANK_LAB_DATA", PROJECT_ROOT / "data"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_url() -> str:
    """SQLAlchemy URL of the store (``RERANK_LAB_DB``); SQLite in the data folder by default."""
    return os.environ.get("RERANK_LAB_DB") or f"sqlite:///{data_dir() / 'rerank_lab.sqlite'}"


def shared_data_dir() -> Path | None:
    """The benchmark data beside the checkout (``../shared/data``), if present."""
    path = Path(os.environ.get("RERANK_LAB_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))
    return path if path.is_dir() else None


def checkpoint_dir() -> Path:
    path = data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def seed_runs_dir() -> Path:
    """Per-seed TREC runs, one folder per dataset (``RERANK_LAB_SEED_RUNS``, default the benchmarks' kept
    runs, ``benchmarks/results/runs``): the Compare page compares seeds of one model with another's."""
    return Path(os.environ.get("RERANK_LAB_SEED_RUNS", PROJECT_ROOT / "benchmarks" / "results" / "runs"))
