"""The per-request path made cheap for the speed benchmark keeps its behaviour: the dataset cache
key still changes on a re-import, and the parse cache's long-lived connections survive a fork."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from db.store import Store
from qa_core.services import workbench
from qa_core.text.nlp import ParseCache, parse_many
from qa_core.types import Candidate, Dataset, Question


def _dataset(answer: str) -> Dataset:
    return Dataset("tiny", [Question("q1", "who wrote hamlet", [Candidate("d1", answer, label=1)], split="test")])


def test_reimport_changes_dataset_version_and_rebuilds_candidates(database_url: str):
    store = Store(database_url)
    try:
        store.import_dataset(_dataset("Shakespeare wrote Hamlet."))
        first = workbench.dataset_version(store, "tiny")
        assert workbench.dataset_version(store, "tiny") == first
        assert workbench.candidates_for_question(store, "tiny", "hamlet")[0].text == "Shakespeare wrote Hamlet."

        store.import_dataset(_dataset("Hamlet was written around 1600."), replace=True)
        assert workbench.dataset_version(store, "tiny") != first
        assert workbench.candidates_for_question(store, "tiny", "hamlet")[0].text == "Hamlet was written around 1600."
    finally:
        store.close()


def _parse_in_child(cache: ParseCache, text: str) -> None:
    parse_many([text], cache=cache)


def test_parse_cache_is_usable_in_parent_and_forked_child(tmp_path: Path):
    cache = ParseCache(tmp_path / "cache.sqlite")
    parse_many(["The parent parses first."], cache=cache)  # opens the parent's connection
    child = multiprocessing.get_context("fork").Process(target=_parse_in_child, args=(cache, "A child parses."))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    parse_many(["The parent parses again."], cache=cache)  # the parent's connection still works
    assert len(cache) == 3 and len(ParseCache(tmp_path / "cache.sqlite")) == 3
