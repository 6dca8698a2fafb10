"""The per-request path made cheap for the speed benchmark keeps its behaviour: the dataset cache
key still changes on a re-import, and the parse cache's long-lived connections survive a fork."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from db.store import Store
from qa_core.retrieval import FIRST_STAGE, FIRST_STAGE_FEEDBACK, BM25Index
from qa_core.services import candidate_pools
from qa_core.text.nlp import ParseCache, parse_many
from qa_core.types import Candidate, Dataset, InputError, Question


def _dataset(answer: str) -> Dataset:
    return Dataset("tiny", [Question("q1", "who wrote hamlet", [Candidate("d1", answer, label=1)], split="test")])


def test_reimport_changes_dataset_version_and_rebuilds_candidates(database_url: str):
    store = Store(database_url)
    try:
        store.datasets.import_dataset(_dataset("Shakespeare wrote Hamlet."))
        first = candidate_pools.dataset_version(store, "tiny")
        assert candidate_pools.dataset_version(store, "tiny") == first
        assert candidate_pools.candidates_for_question(store, "tiny", "hamlet")[0].text == "Shakespeare wrote Hamlet."

        store.datasets.import_dataset(_dataset("Hamlet was written around 1600."), replace=True)
        assert candidate_pools.dataset_version(store, "tiny") != first
        assert candidate_pools.candidates_for_question(store, "tiny", "hamlet")[0].text == "Hamlet was written around 1600."
    finally:
        store.close()


# A second process (a server restart, a replica) with BM25Index.build forbidden: it must load the index.
_SECOND_PROCESS = """
import sys
from db.store import Store
from qa_core.retrieval import FIRST_STAGE_FEEDBACK, BM25Index
from qa_core.services import candidate_pools
BM25Index.build = None
print(candidate_pools.candidates_for_question(Store(sys.argv[1]), "tiny", "who wrote hamlet")[0].text)
"""


def test_bm25_index_is_saved_once_per_version_and_loaded_by_another_process(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store = Store(url)
    try:
        store.datasets.import_dataset(_dataset("Shakespeare wrote Hamlet."))
        candidate_pools.candidates_for_question(store, "tiny", "hamlet")
        folder = candidate_pools.index_folder(store, "tiny")
        (first,) = folder.iterdir()
        with pytest.raises(InputError, match="question words such as 'who' or 'is' are not searched"):
            candidate_pools.candidates_for_question(store, "tiny", "who was it?")
        child = subprocess.run([sys.executable, "-c", _SECOND_PROCESS, url], capture_output=True, text=True,
                               env=os.environ, check=False)
        assert (child.returncode, child.stdout.strip()) == (0, "Shakespeare wrote Hamlet."), child.stderr

        store.datasets.import_dataset(_dataset("Hamlet was written around 1600."), replace=True)
        assert candidate_pools.candidates_for_question(store, "tiny", "hamlet")[0].text == "Hamlet was written around 1600."
        (rebuilt,) = folder.iterdir()
        assert rebuilt != first  # the re-import's index replaced the stale one
    finally:
        store.close()


def test_typed_question_reads_the_collection_without_loading_the_dataset(database_url: str, demo: Dataset,
                                                                         monkeypatch: pytest.MonkeyPatch):
    """The index comes from a projection of the candidate texts and the hits are read by id: the same
    top n, in the same order (ties included), as an index over ``load_dataset``'s collection; each
    sentence is indexed with its document's context (one URL, or a WikiQA pool), the context reaching
    the saved index."""
    # a qid and a doc_id holding '/', and a sentence repeated under a later question (the first is kept);
    # two sentences of one page (its URL, the fragment aside) and a WikiQA pool, each naming its subject
    # only in its first sentence
    url = "https://example.org/hamlet"
    odd = Question("q/1", "who wrote hamlet", [Candidate("d/1", "Hamlet was written by Shakespeare around 1600.",
                                                         source="odd", url=url),
                                               Candidate("d2", demo.questions[0].candidates[0].text),
                                               Candidate("d3", "He also wrote Macbeth.", source="odd", url=url + "#later")],
                   split="test")
    page = Question("w1", "who was ada lovelace", [Candidate("w1-0", "Ada Lovelace was an English mathematician.", source="wikiqa"),
                                                   Candidate("w1-1", "She published the first algorithm.", source="wikiqa")],
                    split="test")
    store = Store(database_url)
    try:
        store.datasets.import_dataset(Dataset("typed", [*demo.questions, odd, page]))
        stored = store.datasets.load_dataset("typed")
        sentences = candidate_pools.collection_sentences(stored)
        in_memory = BM25Index.build(candidate_pools.collection_passages(candidate_pools.dataset_rows(stored), FIRST_STAGE),
                                    FIRST_STAGE)

        def forbidden(*_args, **_kwargs):
            raise AssertionError("the typed-question path loaded the whole dataset")

        monkeypatch.setattr(store.datasets, "load_dataset", forbidden)
        for question in ["who wrote hamlet in 1600", "shakespeare", "lovelace", *(q.text for q in demo.questions[:6])]:
            expected = [
                dataclasses.replace(sentences[name], first_stage_rank=rank, first_stage_score=score)
                for rank, (name, score) in enumerate(in_memory.search(question, 20, FIRST_STAGE_FEEDBACK), start=1)
            ]
            assert candidate_pools.candidates_for_question(store, "typed", question, k=20) == expected
        best = candidate_pools.candidates_for_question(store, "typed", "hamlet shakespeare 1600")[:2]
        assert {c.doc_id for c in best} == {"q/1/d/1", "q/1/d3"}  # the second through its page's first sentence
        assert "w1/w1-1" in {c.doc_id for c in candidate_pools.candidates_for_question(store, "typed", "lovelace")}
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
