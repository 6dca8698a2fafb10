"""A typed question's BM25 index is built in the background, once, and then used (issue 40)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from db.store import Store
from qa_core import retrieval
from qa_core.retrieval import BM25Index
from qa_core.services import candidate_pools, index_builds, whole_collection
from qa_core.types import Candidate, Dataset, InputError, Question
from tests.pages import ASK, markdown, open_page
from tests.test_app import DEMO_QUESTION

# Another process (a second server, a replica sharing the data folder) asked while the build runs:
# it must neither build nor start a build, and say the build is under way.
_OTHER_PROCESS = """
import sys
from db.store import Store
from qa_core.retrieval import BM25Index
from qa_core.services import index_builds, whole_collection
index_builds.BACKGROUND_FROM = 0
BM25Index.build = None
store = Store(sys.argv[1])
try:
    index_builds.typed_candidates(store, "tiny", "who wrote hamlet")
except index_builds.IndexBuilding as building:
    print(building.state.status, building.state.phase)
print(index_builds.start_build(store, "tiny").status)
"""


@pytest.fixture
def tiny_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(index_builds, "BACKGROUND_FROM", 0)  # the tiny collection counts as a large one
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store = Store(url)
    store.datasets.import_dataset(Dataset("tiny", [Question("q1", "who wrote hamlet", [
        Candidate("d1", "Shakespeare wrote Hamlet.", label=1), Candidate("d2", "Paris is in France.", label=0)])]))
    yield url, store
    store.close()


def test_first_typed_question_starts_one_background_build_whose_index_is_then_used(tiny_store, monkeypatch):
    url, store = tiny_store
    release, builds = threading.Event(), []
    real_build = BM25Index.build

    def held_build(docs, analysis):  # the build waits until the test has looked at it meanwhile
        builds.append(threading.current_thread().name)
        assert release.wait(600)
        return real_build(docs, analysis)

    monkeypatch.setattr(BM25Index, "build", held_build)
    assert index_builds.build_state(store, "tiny").status == "absent"
    with pytest.raises(index_builds.IndexBuilding, match="being built") as first:
        index_builds.typed_candidates(store, "tiny", "who wrote hamlet")
    assert first.value.state.status == "building"
    assert index_builds.ready_size(store, "tiny") is None  # no whole-collection option until it is built
    with pytest.raises(index_builds.IndexBuilding):  # a second session of the same server
        index_builds.typed_candidates(store, "tiny", "hamlet")
    child = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, url], capture_output=True, text=True,
                           env=os.environ, check=False, timeout=600)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split("\n")[1] == "building" and child.stdout.startswith("building ")

    release.set()
    assert index_builds.wait_for_build(store, "tiny").status == "ready"
    assert builds == ["bm25-index-tiny"]  # one build, in the background thread

    def forbidden(*_args, **_kwargs):
        raise AssertionError("the saved index was built again")

    monkeypatch.setattr(BM25Index, "build", forbidden)
    assert index_builds.typed_candidates(store, "tiny", "who wrote hamlet")[0].text == "Shakespeare wrote Hamlet."


def test_an_index_of_other_first_stage_settings_is_stale_and_built_again(tiny_store, monkeypatch):
    """The saved index is keyed by the first stage's analysis, its document context included: another
    setting (a new release's) is not served from the old index but built again, the old one deleted."""
    _, store = tiny_store
    with pytest.raises(index_builds.IndexBuilding):
        index_builds.typed_candidates(store, "tiny", "hamlet")
    assert index_builds.wait_for_build(store, "tiny").status == "ready"
    folder = candidate_pools.index_folder(store, "tiny")
    (first,) = [path for path in folder.iterdir() if not path.name.startswith(".")]

    other = dataclasses.replace(retrieval.FIRST_STAGE, context=())
    monkeypatch.setattr(retrieval, "FIRST_STAGE", other)
    monkeypatch.setattr(index_builds, "FIRST_STAGE", other)
    assert index_builds.build_state(store, "tiny").status == "absent"
    with pytest.raises(index_builds.IndexBuilding):
        index_builds.typed_candidates(store, "tiny", "hamlet")
    assert index_builds.wait_for_build(store, "tiny").status == "ready"
    (rebuilt,) = [path for path in folder.iterdir() if not path.name.startswith(".")]
    assert rebuilt != first and candidate_pools.collection_index(store, "tiny").analysis == other
    assert [c.text for c in index_builds.typed_candidates(store, "tiny", "hamlet")] == ["Shakespeare wrote Hamlet."]


def test_a_failed_build_is_said_and_the_next_question_starts_it_again(tiny_store, monkeypatch):
    _, store = tiny_store
    real_build = BM25Index.build

    def broken(*_args, **_kwargs):
        raise MemoryError("no room")

    monkeypatch.setattr(BM25Index, "build", broken)
    try:
        index_builds.typed_candidates(store, "tiny", "hamlet")
    except index_builds.IndexBuilding:
        pass
    state = index_builds.wait_for_build(store, "tiny")
    assert (state.status, state.error) == ("failed", "MemoryError: no room")
    monkeypatch.setattr(BM25Index, "build", real_build)
    try:
        index_builds.typed_candidates(store, "tiny", "hamlet")
    except index_builds.IndexBuilding:
        assert index_builds.wait_for_build(store, "tiny").status == "ready"
    assert [c.text for c in index_builds.typed_candidates(store, "tiny", "hamlet")] == ["Shakespeare wrote Hamlet."]


def test_small_collection_is_indexed_within_the_request(database_url: str):
    store = Store(database_url)
    try:
        store.datasets.import_dataset(Dataset("small", [Question("q1", "who wrote hamlet", [Candidate("d1", "Shakespeare wrote Hamlet.")])]))
        assert index_builds.typed_candidates(store, "small", "hamlet")[0].text == "Shakespeare wrote Hamlet."
        with pytest.raises(InputError, match="the question"):
            index_builds.typed_candidates(store, "small", "  ")
    finally:
        store.close()


def test_whole_collection_is_every_sentence_with_its_bm25_rank_and_refused_above_the_limit(tiny_store, monkeypatch):
    _, store = tiny_store
    monkeypatch.setattr(index_builds, "BACKGROUND_FROM", 10**9)  # indexed within the request
    assert index_builds.ready_size(store, "tiny") == 2  # indexed here, a small collection
    pool = index_builds.typed_candidates(store, "tiny", "where is paris", whole=True)
    assert [(c.doc_id, c.first_stage_rank) for c in pool] == [("q1/d1", None), ("q1/d2", 1)]
    assert whole_collection.offered_size(2) == 2
    assert whole_collection.origin(store, "tiny", None, pool).startswith("the whole collection: all 2 unique sentences")
    assert whole_collection.origin(store, "tiny", None, pool[1:]).startswith("BM25's best")
    monkeypatch.setattr(whole_collection, "WHOLE_COLLECTION_LIMIT", 1)
    assert whole_collection.offered_size(2) is None
    with pytest.raises(InputError, match="has 2 unique sentences, more than the 1"):
        index_builds.typed_candidates(store, "tiny", "where is paris", whole=True)


def test_ask_shows_the_build_and_ranks_dataset_questions_meanwhile(store_url, monkeypatch):
    """The Ask page, with the demo counted as a large collection: a typed question starts the build and
    says so with its progress, a dataset question is ranked meanwhile, and once built the typed one is."""
    monkeypatch.setattr(index_builds, "BACKGROUND_FROM", 0)
    release, real_build = threading.Event(), BM25Index.build

    def held_build(docs, analysis):
        assert release.wait(600)
        return real_build(docs, analysis)

    monkeypatch.setattr(BM25Index, "build", held_build)
    app = open_page(ASK)
    app.selectbox(key="model").select("overlap")
    app.text_input(key="question").input(DEMO_QUESTION)
    app.button[0].click().run()
    assert not app.exception and not app.error, (app.exception, [e.value for e in app.error])
    assert any("being built for typed questions" in info.value for info in app.info)
    (progress,) = app.get("progress")
    assert progress.proto.text.startswith("Building the search index of demo for typed questions: ")
    assert not app.dataframe and "whole" not in [t.key for t in app.toggle]

    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button[0].click().run()
    assert not app.exception and len(app.dataframe) == 1  # a dataset question's own pool meanwhile

    release.set()
    assert index_builds.wait_for_build(Store(store_url), "demo").status == "ready"
    app.radio(key="source").set_value("Type a question").run()
    app.text_input(key="question").input(DEMO_QUESTION)  # a widget not drawn meanwhile lost its value
    app.button[0].click().run()
    assert not app.exception and not app.error and not app.get("progress"), [e.value for e in app.error]
    assert "BM25's best of the dataset's" in markdown(app)


def test_another_datasets_index_files_under_this_datasets_manifest_are_rebuilt_not_a_lasting_refusal(
    tiny_store, monkeypatch
) -> None:
    """Issue 45: they loaded (the same number of sentences), searched, and named sentences the store
    does not have, so every typed question was refused as 'imported again while the question was
    searched; ask it again', for good. The checksum in the manifest rebuilds it with a warning."""
    url, store = tiny_store
    monkeypatch.setattr(index_builds, "BACKGROUND_FROM", 10**9)  # indexed within the request
    store.datasets.import_dataset(Dataset("other", [Question("q9", "who painted it", [
        Candidate("x1", "Leonardo wrote Hamlet notes.", label=1), Candidate("x2", "Rome is in Italy.", label=0)])]))
    candidate_pools.collection_index(store, "other")
    for name in ("tiny", "other"):  # as an earlier process left them: saved, not loaded in this one
        retrieval.saved_index(candidate_pools.index_folder(store, name), candidate_pools.dataset_version(store, name),
                              lambda name=name: candidate_pools.collection_passages(store.datasets.candidate_texts(name),
                                                                          retrieval.FIRST_STAGE))
    (tiny,) = candidate_pools.index_folder(store, "tiny").iterdir()
    (other,) = candidate_pools.index_folder(store, "other").iterdir()
    for path in other.iterdir():
        if path.name != "manifest.json":
            (tiny / path.name).write_bytes(path.read_bytes())
    with pytest.warns(retrieval.IndexRebuiltWarning, match="checksum differs"):
        found = index_builds.typed_candidates(store, "tiny", "who wrote hamlet")
    assert [c.doc_id for c in found][0] == "q1/d1" and {c.doc_id for c in found} <= {"q1/d1", "q1/d2"}
