"""Where things live: data folder, database URL, the shared benchmark data; and the checks that
keep what the program writes inside the data folder and stop a long job before the disk is full."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote

from qa_core.names import check_name
from qa_core.types import InputError, StorageError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

PROJECT_ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
MIN_FREE_MB = 200
"""Free disk space (MB) a training needs before it starts (``RERANK_LAB_MIN_FREE_MB`` overrides):
room for its checkpoint (SM-CNN's is ~10 MB, the largest models' ~100 MB) and the store's writes."""


def data_dir() -> Path:
    """Folder for the SQLite store, checkpoints and caches (``RERANK_LAB_DATA``, default ``./data``)."""
    path = Path(os.environ.get("RERANK_LAB_DATA", PROJECT_ROOT / "data"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_url() -> str:
    """SQLAlchemy URL of the store (``RERANK_LAB_DB``); SQLite in the data folder by default."""
    return os.environ.get("RERANK_LAB_DB") or f"sqlite:///{data_dir() / 'rerank_lab.sqlite'}"


def parse_cache_path() -> Path:
    """The spaCy parse cache (``RERANK_LAB_PARSE_CACHE``, default ``parse_cache.sqlite`` in the data
    folder). Entries are keyed by text and parser version, so stores in several data folders may
    share one cache and parse each text once between them."""
    path = os.environ.get("RERANK_LAB_PARSE_CACHE")
    if not path:
        return data_dir() / "parse_cache.sqlite"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return Path(path)


JOB_RUNNERS = ("process", "worker")


def job_runner() -> str:
    """Who runs the training jobs the app starts (``RERANK_LAB_JOB_RUNNER``): ``process`` (default:
    the app starts a process for each) or ``worker`` (they wait in the store's queue for
    ``python -m qa_core worker``, on this machine or any other that reaches the store)."""
    runner = os.environ.get("RERANK_LAB_JOB_RUNNER", "process")
    if runner not in JOB_RUNNERS:
        raise InputError(f"RERANK_LAB_JOB_RUNNER must be one of {', '.join(JOB_RUNNERS)}, got {runner!r}")
    return runner


def parse_database_url(url: str) -> URL:
    """``sqlalchemy.engine.make_url``, also for a password holding an unencoded ``@``.

    URLs want ``%40`` there, but people paste passwords as they are: the user part then ends at
    the LAST ``@`` before the host (as browsers read it). The query (from the first ``?`` that a
    ``=`` follows) is parsed apart, since its values may hold an ``@`` too (``?password=a@b``),
    which ``make_url`` would read as the end of the user part. A URL that still cannot be parsed
    raises ``InputError`` without repeating any of it, so no part of a password reaches a message.
    """
    from sqlalchemy.engine import make_url

    scheme, separator, rest = url.partition("://")
    before_query, _, query = rest.partition("?")
    # user:p?a=1@host/db: the only '@' follows the '?', no '/' precedes it and a host/database follows
    # it. Without that '/' (host?password=p@ss) the '@' is the query's: read as a password it would
    # put the query's secret in the user name or its tail in the host, both shown unmasked.
    user_part, _, host_part = rest.rpartition("@")
    in_password = "@" not in before_query and "@" in query and "/" not in user_part and "/" in host_part
    if "=" not in query or in_password:  # a '?' inside the password, not a query
        before_query, query = rest, ""
    user_part, _, host_part = before_query.rpartition("@")
    if separator and "@" in user_part and not rest.startswith("/"):
        user, _, password = user_part.partition(":")
        before_query = f"{quote(user, safe='')}:{quote(password, safe='')}@{host_part}"
    try:
        parsed = make_url(f"{scheme}{separator}{before_query}")
        return parsed.update_query_string(query) if query else parsed
    except Exception:  # ArgumentError, ValueError (a port that is not a number), ...
        raise InputError(
            "the database URL cannot be read; expected dialect://user:password@host:port/database "
            "(or sqlite:///path/to/file.sqlite); write a '?', '@' or '/' in a password as %3F, %40 or %2F"
        ) from None


def inside_data_dir(path: Path) -> Path:
    """``path`` if it lies inside the data folder once resolved (``..`` and symlinks followed),
    else ``InputError``: names built from user input (dataset, model) never write elsewhere."""
    root = data_dir().resolve()
    if not path.resolve().is_relative_to(root):
        raise InputError(f"refused to write {path}: it is outside the data folder {root}")
    return path


def min_free_bytes() -> int:
    try:
        return int(float(os.environ.get("RERANK_LAB_MIN_FREE_MB", MIN_FREE_MB)) * 1024 * 1024)
    except ValueError:
        raise InputError(f"RERANK_LAB_MIN_FREE_MB must be a number of megabytes, got {os.environ['RERANK_LAB_MIN_FREE_MB']!r}") from None


def watch_free_space(folder: Path, what: str, callback: Callable[[T], None] | None) -> Callable[[T], None]:
    """``callback`` (if any) behind a free-space check at every call (a training's progress
    points): a disk that fills during a long run stops it at once, not at its end."""

    def checked(point: T) -> None:
        ensure_free_space(folder, what)
        if callback is not None:
            callback(point)

    return checked


def ensure_free_space(folder: Path, what: str) -> None:
    """``StorageError`` when the disk holding ``folder`` has less than ``min_free_bytes()`` free,
    so a long job stops before it starts instead of failing at its end."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free, needed = shutil.disk_usage(probe).free, min_free_bytes()
    if free < needed:
        raise StorageError(
            f"only {free / 2**20:,.0f} MB free on the disk of {folder}; {what} needs at least "
            f"{needed / 2**20:,.0f} MB (RERANK_LAB_MIN_FREE_MB): free some space first"
        )


def available_memory() -> int | None:
    """Bytes of memory a collection may take: ``RERANK_LAB_MEMORY_MB`` where set (a deployment's
    budget, e.g. a replica's share of the machine), else what the kernel reports available
    (``MemAvailable``), lowered to what a container's cgroup limit leaves; None where neither is known."""
    setting = os.environ.get("RERANK_LAB_MEMORY_MB")
    if setting:
        try:
            return int(float(setting) * 2**20)
        except ValueError:
            raise InputError(f"RERANK_LAB_MEMORY_MB must be a number of megabytes, got {setting!r}") from None
    available = None
    try:
        meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        available = int(meminfo["MemAvailable"].split()[0]) * 1024
        cgroup = Path("/sys/fs/cgroup")
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            available = min(available, int(limit) - int((cgroup / "memory.current").read_text()))
    except (OSError, KeyError, ValueError):  # not Linux, or no cgroup v2 limit: what was found stands
        pass
    return available


MAX_MODELS = 3
"""Loaded rankers (a model version on a dataset) the server keeps for every session
(``RERANK_LAB_MAX_MODELS`` overrides); the least recently used goes first. A loaded ranker is small
(another SM-CNN version ~1 MB, the tree kernel ~3 MB) but loading one again costs time and transient
memory (a baseline refits on the dataset's TRAIN): docs/benchmarks.md, "Server memory after a walk"."""
MAX_INDEXES = 1
"""Datasets' BM25 collections (typed questions' first stage) a process keeps loaded
(``RERANK_LAB_MAX_INDEXES`` overrides); the least recently used goes first, and comes back
memory-mapped from the data folder when asked again."""
MAX_DATASETS = 2
"""Datasets' questions with their pools the server keeps loaded (``RERANK_LAB_MAX_DATASETS``
overrides; WikiQA's take ~16 MB); the least recently used goes first."""


MAX_PARSES = 10_000
"""Parsed texts a process keeps in memory above the parse cache's SQLite file
(``RERANK_LAB_MAX_PARSES`` overrides); the oldest go first and are read from the file when asked
again. A parsed sentence holds ~7 KB of Python objects: at the former 200,000 a server that fitted a
baseline on WikiQA's TRAIN kept ~100 MB of parses it never asked for again. 10,000 holds a whole TEST
split (WikiQA's 2,351 candidates, TrecQA's 1,517) and a batch job's chunk (2,048 pairs)."""


def max_models() -> int:
    return _count_setting("RERANK_LAB_MAX_MODELS", MAX_MODELS)


def max_indexes() -> int:
    return _count_setting("RERANK_LAB_MAX_INDEXES", MAX_INDEXES)


def max_datasets() -> int:
    return _count_setting("RERANK_LAB_MAX_DATASETS", MAX_DATASETS)


def max_parses() -> int:
    return _count_setting("RERANK_LAB_MAX_PARSES", MAX_PARSES)


def _count_setting(name: str, default: int) -> int:
    """The whole number of at least 1 that ``name`` sets, else ``default``. A bad value is said in
    one logged sentence and the default kept: the pages read these when they are first imported,
    where a refusal would leave every page on a traceback."""
    setting = os.environ.get(name, "").strip()
    if setting.isdecimal() and int(setting) >= 1:
        return int(setting)
    if setting:
        logging.getLogger(__name__).warning("%s must be a whole number of at least 1, got %r; using %d", name, setting, default)
    return default


def shared_data_dir() -> Path | None:
    """The benchmark data beside the checkout (``../shared/data``), if present."""
    path = Path(os.environ.get("RERANK_LAB_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))
    return path if path.is_dir() else None


def env_flag(name: str) -> bool:
    """Whether the environment switches ``name`` on (1, true, yes or on, any case): the one reading of
    every on/off setting, so no two settings accept different words."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def allow_plain_http() -> bool:
    """``RERANK_LAB_ALLOW_PLAIN_HTTP=1``: team mode may serve sign-ins over plain HTTP on a network
    address (``qa_core.access.plain_http_refusal``), an explicit choice of the operator."""
    return env_flag("RERANK_LAB_ALLOW_PLAIN_HTTP")


CHECKPOINT_FOLDER = "models"
"""The data folder's sub-folder where every trained model's checkpoint is written and registered."""


def checkpoint_dir() -> Path:
    path = data_dir() / CHECKPOINT_FOLDER
    path.mkdir(parents=True, exist_ok=True)
    return path


def inside_checkpoint_dir(path: str | Path) -> Path:
    """``path`` if it lies in the data folder's ``models`` folder once resolved (``..`` and symlinks
    followed), else ``InputError``: the store registers only checkpoints written there
    (``checkpoints.new_checkpoint_path``), so no version, promoted or not, makes the pages, jobs and
    commands load a file from elsewhere on the machine."""
    root = (data_dir() / CHECKPOINT_FOLDER).resolve()
    if not Path(path).resolve().is_relative_to(root):
        raise InputError(f"refused to register checkpoint {path}: it is outside the data folder's models folder "
                         f"{root} (RERANK_LAB_DATA), where training writes checkpoints; nothing was registered")
    return Path(path)


def seed_runs_dir(dataset: str | None = None) -> Path:
    """Per-seed TREC runs, one folder per dataset (``RERANK_LAB_SEED_RUNS``, default the benchmarks' kept
    runs, ``benchmarks/results/runs``): the Compare page compares seeds of one model with another's.
    With ``dataset``, its folder (``InputError`` for a name that is no safe folder name)."""
    root = Path(os.environ.get("RERANK_LAB_SEED_RUNS", PROJECT_ROOT / "benchmarks" / "results" / "runs"))
    return root if dataset is None else root / check_name(dataset, "dataset name")


