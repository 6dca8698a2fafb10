"""A dataset's BM25 index built in the background on its first typed question, with progress.

Building the index of a large collection takes a while (about a minute at a million candidates,
``benchmarks/scale.py``); a page request must not wait for it. ``typed_candidates`` serves a typed
question from the saved index when there is one, and otherwise starts ``start_build`` and raises
``IndexBuilding``, so the page says so and its other work (a dataset question's own candidates)
goes on. The build runs in a thread of the serving process and writes its phase and progress to
a file beside the index; exactly one process builds a folder's index at a time
(``retrieval.BuildLock``, held for the whole build), so a second session, process or replica
sharing the data folder reads that progress instead of starting another build. Once saved, every
process loads the index memory-mapped (``candidate_pools.collection_index``).

Not the store's job queue (``db/jobs.py``): its rows are training jobs (the right to train, which
an annotator typing a question lacks; the Train page lists them; a worker trains whatever it
claims), and the index lives in the data folder, which is the one thing every process that reads
it shares, so the lock and the progress live there too.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from qa_core.checkpoints import atomic_file
from qa_core.retrieval import FIRST_STAGE, BuildLock, is_saved, saved_index
from qa_core.services import candidate_pools, whole_collection
from qa_core.types import Candidate, InputError

if TYPE_CHECKING:
    from db.store import Store

logger = logging.getLogger(__name__)

_PROGRESS_FILE = ".progress.json"
READING_SHARE = 0.6  # of the progress bar: streaming the sentences out of the store; then indexing, saving
PHASE_FRACTIONS = {"indexing": READING_SHARE, "saving": 0.9}
REPORT_EVERY_ROWS = 20_000
# Candidates from which a typed question's index is built in the background: below, the build takes
# about a second or less (docs/benchmarks.md, "scale": 0.9 s at 10,000, 3.1 s at 100,000).
BACKGROUND_FROM = 20_000

# This process's running builds by index folder (the lock file says the same across processes).
_running: dict[Path, threading.Thread] = {}
_running_lock = threading.Lock()


@dataclass(frozen=True)
class BuildState:
    """Where a dataset's index stands: ``ready`` (saved for its current version), ``building``
    (here or in another process: ``phase`` and ``fraction`` 0..1), ``failed`` (the last build of this
    version, with ``error``) or ``absent`` (never built for this version)."""

    status: str
    phase: str = ""
    fraction: float = 0.0
    error: str | None = None


class IndexBuilding(InputError):
    """A typed question came before the dataset's index was ready; its build is under way."""

    def __init__(self, dataset: str, state: BuildState):
        self.state = state
        super().__init__(
            f"the search index of dataset {dataset!r} is being built for typed questions; "
            "ask again when it is ready (its progress is shown below) or pick one of the dataset's questions meanwhile"
        )


def _progress_path(folder: Path) -> Path:
    return folder / _PROGRESS_FILE


def _write_progress(folder: Path, version: str, phase: str, fraction: float, error: str | None = None) -> None:
    record = {"version": version, "phase": phase, "fraction": fraction, "error": error, "pid": os.getpid(),
              "at": time.time()}
    with atomic_file(_progress_path(folder), "w", encoding="utf-8") as handle:
        json.dump(record, handle)


def _read_progress(folder: Path, version: str) -> dict[str, object] | None:
    """The progress file's record for ``version`` (another version's, or an unreadable file: None)."""
    try:
        record = json.loads(_progress_path(folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("version") == version else None


def build_state(store: Store, dataset: str) -> BuildState:
    """The state of ``dataset``'s index for its current version (one lookup and a few file reads)."""
    folder, version = candidate_pools.index_folder(store, dataset), candidate_pools.dataset_version(store, dataset)
    if is_saved(folder, version, FIRST_STAGE):
        return BuildState("ready", fraction=1.0)
    record = _read_progress(folder, version) or {}
    with _running_lock:
        here = folder in _running
    if here or BuildLock(folder).held_elsewhere():
        return BuildState("building", str(record.get("phase") or "starting"), float(record.get("fraction") or 0.0))
    if record.get("error"):
        return BuildState("failed", error=str(record["error"]))
    # A build that ended between the first look and now has saved the index.
    return BuildState("ready", fraction=1.0) if is_saved(folder, version, FIRST_STAGE) else BuildState("absent")


def start_build(store: Store, dataset: str) -> BuildState:
    """Start building ``dataset``'s index in a background thread unless it is ready or being built
    (in this process or another); returns the state after that."""
    folder, version = candidate_pools.index_folder(store, dataset), candidate_pools.dataset_version(store, dataset)
    with _running_lock:
        if folder not in _running and not is_saved(folder, version, FIRST_STAGE):
            lock = BuildLock(folder)
            if lock.acquire():  # else another process builds it
                _write_progress(folder, version, "starting", 0.0)
                thread = threading.Thread(target=_build, args=(store, dataset, folder, version, lock),
                                          name=f"bm25-index-{dataset}", daemon=True)
                _running[folder] = thread
                thread.start()
    return build_state(store, dataset)


def _build(store: Store, dataset: str, folder: Path, version: str, lock: BuildLock) -> None:
    """The build thread: stream the sentences, index, save; the lock is released at the end."""
    try:
        total = max(1, store.datasets.dataset_summary(dataset)["candidates"])

        def rows() -> Iterator[candidate_pools.CollectionRow]:
            for count, row in enumerate(store.datasets.candidate_texts(dataset), start=1):
                if count % REPORT_EVERY_ROWS == 0:
                    _write_progress(folder, version, f"reading sentences ({count:,} of {total:,})",
                                    READING_SHARE * count / total)
                yield row

        def phase(name: str) -> None:
            _write_progress(folder, version, name, PHASE_FRACTIONS[name])

        saved_index(folder, version, lambda: candidate_pools.collection_passages(rows(), FIRST_STAGE), FIRST_STAGE, phase)
        _write_progress(folder, version, "ready", 1.0)
    except Exception as error:  # the state says it on the page; the traceback goes to the server's log
        logger.exception("building the BM25 index of dataset %r failed", dataset)
        _write_progress(folder, version, "failed", 0.0, f"{type(error).__name__}: {error}")
    finally:
        lock.release()
        with _running_lock:
            _running.pop(folder, None)


def wait_for_build(store: Store, dataset: str, timeout: float = 600.0) -> BuildState:
    """Block until the build of ``dataset``'s index has ended here (scripts and tests; a page polls
    ``build_state``)."""
    with _running_lock:
        thread = _running.get(candidate_pools.index_folder(store, dataset))
    if thread is not None:
        thread.join(timeout)
    return build_state(store, dataset)


def ready_size(store: Store, dataset: str) -> int | None:
    """The number of unique sentences in ``dataset``'s collection once its index can serve at once:
    saved, or small enough to index within this request (then indexed here); None while it needs
    a background build."""
    if _needs_background_build(store, dataset):
        return None
    return len(candidate_pools.collection_index(store, dataset))


def _needs_background_build(store: Store, dataset: str) -> bool:
    """Whether ``dataset``'s index is not saved yet and too large to build within a request."""
    return (build_state(store, dataset).status != "ready"
            and store.datasets.dataset_summary(dataset)["candidates"] >= BACKGROUND_FROM)


def typed_candidates(store: Store, dataset: str, question: str, k: int = candidate_pools.DEFAULT_CANDIDATES, *,
                     whole: bool = False) -> list[Candidate]:
    """``candidate_pools.candidates_for_question`` (``whole``: ``whole_collection.candidates``, every
    sentence) once the dataset's index is saved. Before that, a collection of ``BACKGROUND_FROM``
    candidates or more has its build started (or found running) and ``IndexBuilding`` says how far
    it is; a smaller one is indexed within the request."""
    question = candidate_pools.check_question(question)
    if _needs_background_build(store, dataset):
        state = start_build(store, dataset)
        if state.status == "building":
            raise IndexBuilding(dataset, state)
        if state.status == "failed":  # it failed at once (a retry starts with the next question)
            raise InputError(f"the search index of dataset {dataset!r} could not be built: {state.error}")
    if whole:
        return whole_collection.candidates(store, dataset, question)
    return candidate_pools.candidates_for_question(store, dataset, question, k)
