"""Concurrency on real databases (SQLite in WAL mode and PostgreSQL), with threads and with
processes: 8 writers x 500 labels lose, duplicate and reorder nothing; sessions labelling the same
queue at once never hold, and so never label, the same pair twice; labelling processes racing
``data import --replace`` (reordered, shrunk, restored files) lose nothing and meet no error."""

from __future__ import annotations

import json
import multiprocessing
import random
import subprocess
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from sqlalchemy import select

from db.models import LabelRetractionRow, LabelRow, QueueClaimRow
from db.store import Store
from qa_core.data.importers import load_dataset
from qa_core.services.labeling import LabelingSession, QueuePolicy
from qa_core.types import Candidate, Dataset, Question
from tests import ROOT

WRITERS, LABELS_PER_WRITER, UNDO_EVERY = 8, 500, 100
JOIN_TIMEOUT_S = 240
RACE_WRITERS, RACE_MIN_LABELS = 3, 100
# A pause between labels, still far quicker than a person: unpaused, the writers spun on both cores
# and starved the imports they race. Paused, each still writes about 400 labels during the three
# imports (measured), and the test takes 9 s instead of 16.
LABEL_PAUSE_S = 0.005


def conc_dataset(questions: int, per_question: int) -> Dataset:
    return Dataset(
        "conc",
        [
            Question(f"q{i}", f"question {i}", [Candidate(f"d{j}", f"answer {i}.{j}") for j in range(per_question)])
            for i in range(questions)
        ],
    )


def run_parallel(kind: str, target: Callable[..., None], jobs: list[tuple[Any, ...]]) -> None:
    """Run ``target(*args, barrier)`` for every args tuple at once, in threads or processes (a
    barrier lines up their start); fail when any of them fails."""
    if kind == "threads":
        barrier: Any = threading.Barrier(len(jobs))
        errors: list[BaseException] = []

        def guarded(*args: Any) -> None:
            try:
                target(*args, barrier)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=guarded, args=args) for args in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
        assert errors == []
        assert not any(thread.is_alive() for thread in threads)
        return
    run_processes([(target, args) for args in jobs])


def process_context() -> Any:
    """Fresh processes, as separate app processes would be (no engine or connection inherited from
    this one), forked from a server that has the store imported already: 8 cold interpreter
    starts would cost more than the test itself on 2 cores."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


def run_processes(calls: list[tuple[Callable[..., None], tuple[Any, ...]]]) -> None:
    """Run every ``target(*args, barrier)`` in its own process at once; fail when any fails."""
    context = process_context()
    barrier = context.Barrier(len(calls))
    processes = [context.Process(target=target, args=(*args, barrier)) for target, args in calls]
    # A child re-runs the parent's __main__ file unless __main__ is importable by name; Streamlit's
    # AppTest (tests/test_app.py) leaves a page script there, which must not run in the workers.
    with mock.patch.dict(sys.modules, {"__main__": types.ModuleType("__main__")}):
        for process in processes:
            process.start()
    for process in processes:
        process.join(JOIN_TIMEOUT_S)
    codes = [process.exitcode for process in processes]
    for process in processes:
        if process.is_alive():
            process.kill()
    assert codes == [0] * len(calls)


# --------------------------------------------------------------------------- workers (top level: pickled by name)


def write_labels(url_or_store: str | Store, writer: int, candidate_ids: list[int], barrier: Any) -> None:
    """500 labels by annotator w<writer>, each with a unique note; every 100th is undone."""
    store = Store(url_or_store) if isinstance(url_or_store, str) else url_or_store
    annotator = f"w{writer}"
    try:
        barrier.wait(timeout=120)
        for i in range(LABELS_PER_WRITER):
            candidate_id = candidate_ids[(7 * i + writer) % len(candidate_ids)]
            store.labels.add_label(candidate_id, annotator, i % 5, note=f"{writer}:{i}")
            if i % UNDO_EVERY == UNDO_EVERY - 1:
                assert store.labels.undo_last(annotator)["candidate_id"] == candidate_id
    finally:
        if isinstance(url_or_store, str):
            store.close()


def label_queue(url_or_store: str | Store, holder: str, barrier: Any) -> None:
    """One session working through the queue (every session in the same order: most contention)."""
    store = Store(url_or_store) if isinstance(url_or_store, str) else url_or_store
    try:
        session = LabelingSession.build(
            store, "conc", holder, "random", seed=0, holder=holder, policy=QueuePolicy(overlap_share=0.0)
        )
        barrier.wait(timeout=120)
        while (item := session.current()) is not None:
            session.label(item, 1, note=holder)
    finally:
        if isinstance(url_or_store, str):
            store.close()


def label_until_stopped(url: str, writer: int, out: str, stop: Any, barrier: Any) -> None:
    """Label the dataset's candidates (as they were when it started) until the imports are done,
    recording every (label id, candidate id, text) that ``add_label`` returned."""
    store = Store(url)
    try:
        rows = store.datasets.candidate_rows("race")
        barrier.wait(timeout=120)
        written, i = [], 0
        while i < RACE_MIN_LABELS or not stop.is_set():
            row = rows[(7 * i + writer) % len(rows)]
            written.append((store.labels.add_label(row.candidate_id, f"w{writer}", i % 5, note=f"{writer}:{i}"),
                            row.candidate_id, row.candidate))
            i += 1
            time.sleep(LABEL_PAUSE_S)
        Path(out).write_text(json.dumps(written))
    finally:
        store.close()


def reimport_with_the_cli(url: str, files: list[str], stop: Any, barrier: Any) -> None:
    """``python -m qa_core data import FILE --name race --replace`` for each file, as a user runs it."""
    try:
        barrier.wait(timeout=120)
        for path in files:
            subprocess.run([sys.executable, "-m", "qa_core", "--db", url, "data", "import", path, "--name", "race",
                            "--replace"], cwd=ROOT, check=True, capture_output=True, timeout=JOIN_TIMEOUT_S)
    finally:
        stop.set()


def race_files(folder: Path) -> list[str]:
    """The same questions reordered, then with a tenth of the candidates dropped and some new, then
    as at first: files without ids, so candidates are known by their text."""
    rng = random.Random(14)
    rows = [(f"question number {q}", f"answer {q}.{c}", int(c == 0)) for q in range(40) for c in range(8)]

    def write(name: str, chosen: list[tuple[str, str, int]]) -> str:
        path = folder / name
        path.write_text("question,candidate,label\n" + "".join(f"{q},{c},{label}\n" for q, c, label in chosen))
        return str(path)

    shuffled = sorted(rows, key=lambda row: (row[0], rng.random()))
    shrunk = [row for row in shuffled if rng.random() > 0.1] + [(f"question number {q}", f"new {q}", 0) for q in range(5)]
    return [write("base.csv", rows), write("shuffled.csv", shuffled), write("shrunk.csv", shrunk), write("again.csv", rows)]


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_eight_writers_lose_and_duplicate_nothing(store: Store, database_url: str, kind: str) -> None:
    store.datasets.import_dataset(conc_dataset(10, 5))
    candidate_ids = [r.candidate_id for r in store.datasets.candidate_rows("conc")]
    shared = store if kind == "threads" else database_url  # threads share one Store, like app sessions
    run_parallel(kind, write_labels, [(shared, writer, candidate_ids) for writer in range(WRITERS)])

    with store.session_scope() as session:
        labels = session.execute(select(LabelRow.id, LabelRow.annotator, LabelRow.note, LabelRow.value)).all()
        retracted = set(session.scalars(select(LabelRetractionRow.label_id)))
    notes = Counter(note for _, _, note, _ in labels)
    assert len(labels) == WRITERS * LABELS_PER_WRITER  # 0 lost
    assert set(notes.values()) == {1}  # 0 duplicated
    assert set(notes) == {f"{w}:{i}" for w in range(WRITERS) for i in range(LABELS_PER_WRITER)}
    for writer in range(WRITERS):  # history intact: each writer's labels in the order written
        own = sorted((label_id, note, value) for label_id, annotator, note, value in labels if annotator == f"w{writer}")
        assert [note for _, note, _ in own] == [f"{writer}:{i}" for i in range(LABELS_PER_WRITER)]
        assert [value for _, _, value in own] == [i % 5 for i in range(LABELS_PER_WRITER)]
    undone = {note for label_id, _, note, _ in labels if label_id in retracted}
    assert undone == {f"{w}:{i}" for w in range(WRITERS) for i in range(UNDO_EVERY - 1, LABELS_PER_WRITER, UNDO_EVERY)}

    # Current labels: each writer's latest unretracted judgement per pair.
    expected: dict[int, dict[str, int]] = {}
    for writer in range(WRITERS):
        for i in range(LABELS_PER_WRITER):
            if i % UNDO_EVERY != UNDO_EVERY - 1:
                candidate_id = candidate_ids[(7 * i + writer) % len(candidate_ids)]
                expected.setdefault(candidate_id, {})[f"w{writer}"] = i % 5
    assert store.labels.current_labels("conc") == expected


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_sessions_never_hold_the_same_pair_at_once(store: Store, database_url: str, kind: str) -> None:
    store.datasets.import_dataset(conc_dataset(8, 6))
    pairs = [r.candidate_id for r in store.datasets.candidate_rows("conc")]
    shared = store if kind == "threads" else database_url
    run_parallel(kind, label_queue, [(shared, f"session-{i}") for i in range(WRITERS)])

    labelled = Counter(candidate_id for candidate_id, _ in _labels(store))
    assert labelled == Counter(pairs)  # every pair judged exactly once: none handed out twice
    with store.session_scope() as session:
        claims = session.execute(
            select(QueueClaimRow.candidate_id, QueueClaimRow.holder, QueueClaimRow.outcome, QueueClaimRow.claimed_at,
                   QueueClaimRow.ended_at)
        ).all()
    assert sorted(c.candidate_id for c in claims) == sorted(pairs)
    assert {c.outcome for c in claims} == {"labelled"}
    assert all(c.claimed_at <= c.ended_at for c in claims)
    # The holder that labelled a pair is the one that held its claim.
    assert {(c.candidate_id, c.holder) for c in claims} == set(_labels(store))
    assert len({c.holder for c in claims}) > 1  # the sessions really shared the work


def _labels(store: Store) -> list[tuple[int, str]]:
    with store.session_scope() as session:
        return [(candidate_id, note) for candidate_id, note in session.execute(select(LabelRow.candidate_id, LabelRow.note))]


def test_labels_written_during_replace_imports_all_survive(store: Store, database_url: str, tmp_path: Path) -> None:
    """The issue's case: labelling processes and ``data import --replace`` at once used to lose
    committed labels (and, on PostgreSQL, hand writers ForeignKeyViolation errors)."""
    base, *replacements = race_files(tmp_path)
    store.datasets.import_dataset(load_dataset(base, name="race"))
    stop = process_context().Event()
    outs = [tmp_path / f"writer{w}.json" for w in range(RACE_WRITERS)]
    run_processes(
        [(label_until_stopped, (database_url, w, str(outs[w]), stop)) for w in range(RACE_WRITERS)]
        + [(reimport_with_the_cli, (database_url, replacements, stop))]
    )

    written = [tuple(entry) for out in outs for entry in json.loads(out.read_text())]
    assert len(written) >= RACE_WRITERS * RACE_MIN_LABELS
    with store.session_scope() as session:
        stored = {label_id: candidate_id for label_id, candidate_id in session.execute(select(LabelRow.id, LabelRow.candidate_id))}
    assert len(stored) == len(written)  # 0 lost, 0 extra
    assert all(stored.get(label_id) == candidate_id for label_id, candidate_id, _ in written)
    texts = {row.candidate_id: row.candidate for row in store.datasets.candidate_rows("race")}
    assert all(texts[candidate_id] == text for _, candidate_id, text in written)  # on the same text, current again
    assert store.labels.orphaned_labels("race") == []
