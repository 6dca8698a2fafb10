"""Concurrency on real databases (SQLite in WAL mode and PostgreSQL), with threads and with
processes: 8 writers x 500 labels lose, duplicate and reorder nothing; sessions labelling the same
queue at once never hold, and so never label, the same pair twice."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import types
from collections import Counter
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from sqlalchemy import select

from db.models import LabelRetractionRow, LabelRow, QueueClaimRow
from db.store import Store
from qa_core.services.labeling import LabelingSession, QueuePolicy
from qa_core.types import Candidate, Dataset, Question

WRITERS, LABELS_PER_WRITER, UNDO_EVERY = 8, 500, 100
JOIN_TIMEOUT_S = 240


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
    # Fresh processes, as separate app processes would be (no engine or connection inherited from
    # this one), forked from a server that has the store imported already: 8 cold interpreter
    # starts would cost more than the test itself on 2 cores.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    barrier = context.Barrier(len(jobs))
    processes = [context.Process(target=target, args=(*args, barrier)) for args in jobs]
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
    assert codes == [0] * len(jobs)


# --------------------------------------------------------------------------- workers (top level: pickled by name)


def write_labels(url_or_store: str | Store, writer: int, candidate_ids: list[int], barrier: Any) -> None:
    """500 labels by annotator w<writer>, each with a unique note; every 100th is undone."""
    store = Store(url_or_store) if isinstance(url_or_store, str) else url_or_store
    annotator = f"w{writer}"
    try:
        barrier.wait(timeout=120)
        for i in range(LABELS_PER_WRITER):
            candidate_id = candidate_ids[(7 * i + writer) % len(candidate_ids)]
            store.add_label(candidate_id, annotator, i % 5, note=f"{writer}:{i}")
            if i % UNDO_EVERY == UNDO_EVERY - 1:
                assert store.undo_last(annotator)["candidate_id"] == candidate_id
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


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_eight_writers_lose_and_duplicate_nothing(store: Store, database_url: str, kind: str) -> None:
    store.import_dataset(conc_dataset(10, 5))
    candidate_ids = [r.candidate_id for r in store.candidate_rows("conc")]
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
    assert store.current_labels("conc") == expected


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_sessions_never_hold_the_same_pair_at_once(store: Store, database_url: str, kind: str) -> None:
    store.import_dataset(conc_dataset(8, 6))
    pairs = [r.candidate_id for r in store.candidate_rows("conc")]
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
