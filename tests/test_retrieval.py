"""qa_core.retrieval: bm25s index over (doc_id, text) pairs and pool scoring."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from qa_core.data.demo import load_demo
from qa_core.retrieval import (
    FIRST_STAGE,
    PLAIN,
    BM25Index,
    Feedback,
    IndexNotSavedWarning,
    IndexRebuiltWarning,
    bm25_scores,
    in_context,
    is_saved,
    saved_index,
)

CORPUS = [
    ("d1", "Mark Twain was born in Florida, Missouri, in 1835."),
    ("d2", "Paris is the capital and largest city of France."),
    ("d3", "Twain wrote The Adventures of Tom Sawyer."),
    ("d4", "The Missouri River is the longest river in North America."),
    ("d5", "Cats sleep for most of the day."),
]


@pytest.fixture(scope="module")
def index() -> BM25Index:
    return BM25Index.build(CORPUS)


def test_rm3_feedback_finds_what_the_top_documents_share_and_keeps_the_query_alone_at_full_weight(
        index: BM25Index, tmp_path: Path) -> None:
    only_query = Feedback(docs=2, terms=5, original_weight=1.0)
    for query in ("Where was Mark Twain born?", "Missouri river", "capital of France"):
        assert [doc for doc, _ in index.search(query, 5, only_query)] == [doc for doc, _ in index.search(query, 5)]
    # "Twain" alone finds d1 and d3; their other terms ("missouri", "born", ...) bring d4 in
    assert {doc for doc, _ in index.search("Twain", 5)} == {"d1", "d3"}
    expanded = index.search("Twain", 5, Feedback(docs=2, terms=10, original_weight=0.5))
    assert {doc for doc, _ in expanded[:2]} == {"d1", "d3"} and "d4" in {doc for doc, _ in expanded}
    index.save(tmp_path)  # the memory-mapped index expands the same way
    assert BM25Index.load(tmp_path, mmap=True).search("Twain", 5, Feedback(docs=2, terms=10)) == expanded


def test_right_document_ranks_first(index: BM25Index) -> None:
    assert index.search("Where was Mark Twain born?", k=3)[0][0] == "d1"
    assert index.search("capital of France", k=3)[0][0] == "d2"
    assert index.search("Who wrote Tom Sawyer?")[0][0] == "d3"


def test_results_sorted_and_only_matching(index: BM25Index) -> None:
    results = index.search("Twain Missouri", k=10)
    scores = [score for _, score in results]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert {doc_id for doc_id, _ in results} == {"d1", "d3", "d4"}  # d2, d5 share no term


def test_k_is_capped(index: BM25Index) -> None:
    assert len(index.search("the Twain Missouri Paris cats", k=1000)) == len(CORPUS)
    assert len(index.search("Twain Missouri", k=1)) == 1
    assert index.search("Twain", k=0) == []


@pytest.mark.parametrize("query", ["", "   ", "the of is and", "xylophone zeppelin", "?!"])
def test_queries_matching_nothing_give_no_results(index: BM25Index, query: str) -> None:
    assert index.search(query) == []


def test_save_load_gives_identical_results(index: BM25Index, tmp_path: Path) -> None:
    index.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25")
    assert loaded.doc_ids == index.doc_ids
    for query in ["Where was Mark Twain born?", "river", "France capital city", ""]:
        assert loaded.search(query, k=5) == index.search(query, k=5)


def test_empty_and_stopword_only_corpora(tmp_path: Path) -> None:
    empty = BM25Index.build([])
    assert len(empty) == 0 and empty.search("Twain") == []
    stopwords_only = BM25Index.build([("a", "the"), ("b", "of it")])
    assert stopwords_only.search("the") == []
    stopwords_only.save(tmp_path / "s")
    assert BM25Index.load(tmp_path / "s").search("the") == []


def test_duplicate_doc_ids_rejected() -> None:
    with pytest.raises(ValueError):
        BM25Index.build([("d1", "a text"), ("d1", "another text")])


def test_bm25_scores_of_a_pool() -> None:
    pool = [text for _, text in CORPUS]
    scores = bm25_scores("Where was Mark Twain born?", pool)
    assert scores.dtype == np.float64 and scores.shape == (len(pool),)
    assert int(np.argmax(scores)) == 0 and scores[1] == 0.0
    np.testing.assert_array_equal(bm25_scores("", pool), np.zeros(len(pool)))
    assert bm25_scores("Twain", []).shape == (0,)
    # The same scores as searching an index of the pool
    by_id = dict(BM25Index.build(CORPUS, PLAIN).search("Where was Mark Twain born?"))
    np.testing.assert_allclose([by_id.get(doc_id, 0.0) for doc_id, _ in CORPUS], scores, rtol=1e-6)


def test_question_words_and_inflections_do_not_decide_the_first_stage() -> None:
    """bm25s' stop list keeps "what", so a rare "what" outweighs the question's content words;
    without a stemmer "capitals" misses "capital"."""
    docs = [("lovelace", "Ada Lovelace wrote what is often called the first computer program."),
            ("canberra", "Canberra is the capital city of Australia, chosen in 1908 between Sydney and Melbourne."),
            ("coal", "Australia exports coal."), ("states", "Australia has six states."),
            ("tax", "The capital gains tax."), ("letters", "Capitals start sentences."),
            ("cricket", "Australia won the cricket match."), ("island", "Australia is an island."),
            ("venture", "Venture capital funds start-ups."), ("punishment", "Capital punishment is banned.")]
    query = "what is the capital of australia"
    assert BM25Index.build(docs, PLAIN).search(query)[0][0] == "lovelace"
    assert BM25Index.build(docs).search(query)[0][0] == "canberra"
    assert "letters" not in dict(BM25Index.build(docs, PLAIN).search("capital"))
    assert "letters" in dict(BM25Index.build(docs).search("capital"))
    assert PLAIN.describe() == "question words kept, no stemmer, k1 1.5, b 0.75"
    assert FIRST_STAGE.describe().startswith("question words dropped, english stemmer, k1 ")


DEMO_QUESTIONS = load_demo().questions
DEMO = [(f"{q.qid}/{c.doc_id}", c.text) for q in DEMO_QUESTIONS for c in q.candidates]
DEMO_QUERIES = [q.text for q in DEMO_QUESTIONS[:40]] + ["", "the of", "xylophone"]


def _must_not_build(*args, **kwargs):
    raise AssertionError("built although a saved index was there")


def test_saved_index_is_loaded_memory_mapped_with_the_in_memory_results(tmp_path: Path, monkeypatch) -> None:
    in_memory = BM25Index.build(DEMO)
    built = saved_index(tmp_path, "v1", lambda: DEMO)
    monkeypatch.setattr(BM25Index, "build", _must_not_build)
    loaded = saved_index(tmp_path, "v1", _must_not_build)
    assert isinstance(loaded._retriever.scores["data"], np.memmap)
    for query in DEMO_QUERIES:
        assert loaded.search(query, 50) == built.search(query, 50) == in_memory.search(query, 50)


def test_another_version_or_analysis_is_rebuilt_and_the_stale_index_deleted(tmp_path: Path) -> None:
    saved_index(tmp_path, "v1", lambda: DEMO)
    assert saved_index(tmp_path, "v2", lambda: CORPUS).doc_ids == [doc_id for doc_id, _ in CORPUS]
    assert saved_index(tmp_path, "v2", lambda: CORPUS, PLAIN).analysis == PLAIN
    assert len([p for p in tmp_path.iterdir()]) == 1


@pytest.mark.parametrize("damage", ["manifest of another version", "truncated array", "missing doc ids"])
def test_corrupt_or_foreign_saved_index_is_rebuilt_with_a_warning(tmp_path: Path, damage: str) -> None:
    saved_index(tmp_path, "v1", lambda: DEMO)
    (folder,) = tmp_path.iterdir()
    if damage == "manifest of another version":
        manifest = folder / "manifest.json"
        manifest.write_text(manifest.read_text().replace('"v1"', '"v0"'))
    elif damage == "truncated array":
        array = folder / "data.csc.index.npy"
        array.write_bytes(array.read_bytes()[:100])
    else:
        (folder / "doc_ids.json").unlink()
    with pytest.warns(IndexRebuiltWarning, match="could not be used"):
        rebuilt = saved_index(tmp_path, "v1", lambda: DEMO)
    expected = BM25Index.build(DEMO)
    assert all(rebuilt.search(q, 50) == expected.search(q, 50) for q in DEMO_QUERIES[:5])
    assert saved_index(tmp_path, "v1", _must_not_build).search(DEMO_QUERIES[0]) == expected.search(DEMO_QUERIES[0])


def test_a_data_folder_that_refuses_the_index_still_searches_from_memory(tmp_path: Path) -> None:
    """A read-only or full data folder (the store opens read-only there) must not turn a typed
    question into a traceback: the index is built and used in memory, with a warning."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the index folder's parent should be")  # mkdir fails, even as root
    with pytest.warns(IndexNotSavedWarning, match="could not be saved"):
        index = saved_index(blocked / "bm25", "v1", lambda: DEMO)
    assert index.search(DEMO_QUERIES[0], 50) == BM25Index.build(DEMO).search(DEMO_QUERIES[0], 50)


def test_ties_at_the_cut_off_follow_the_tie_rule_among_all_tied_documents() -> None:
    """Only the k best and those tied with the k-th are ordered (a speed-up): the cut still takes the
    tie rule's first (doc id descending) among every tied document, not whichever came first."""
    tied = BM25Index.build([(f"d{i}", "cats sleep all day") for i in range(1, 8)] + [("a", "cats cats sleep all day")])
    assert [doc for doc, _ in tied.search("cats", 3)] == ["a", "d7", "d6"]
    assert [doc for doc, _ in tied.search("cats", 3, Feedback(docs=2, terms=3))] == ["a", "d7", "d6"]


PAGES = [
    ("Ada Lovelace was an English mathematician.", "url:ada"),
    ("She wrote the first computer program.", "url:ada"),
    ("Alan Turing was a British mathematician.", "url:turing"),
    ("He proposed the imitation game.", "url:turing"),
    ("Later work followed the game.", "url:turing"),
    ("She wrote it alone.", None),  # no known document: indexed alone
]


def test_a_sentence_is_indexed_with_its_documents_context_and_the_saved_index_is_keyed_by_it(tmp_path: Path) -> None:
    lead = in_context(PAGES, ("lead",))
    assert lead[1] == "She wrote the first computer program. Ada Lovelace was an English mathematician."
    assert lead[4] == "Later work followed the game. Alan Turing was a British mathematician."
    assert (lead[0], lead[5]) == (PAGES[0][0], PAGES[5][0])  # a lead has no context of its own
    both = in_context(PAGES, ("lead", "neighbours"))  # the lead is also the previous sentence: said once
    assert both[3] == ("He proposed the imitation game. Alan Turing was a British mathematician. "
                       "Later work followed the game.")
    assert in_context(PAGES, ()) == [text for text, _ in PAGES]
    with pytest.raises(ValueError, match="unknown context part"):
        in_context(PAGES, ("title",))

    with_lead = dataclasses.replace(FIRST_STAGE, context=("lead",))
    docs = [(f"p{i}", text) for i, text in enumerate(lead)]
    assert {doc for doc, _ in BM25Index.build(docs, with_lead).search("Lovelace")} == {"p0", "p1"}
    assert "each sentence indexed with its document's first sentence" in with_lead.describe()
    saved_index(tmp_path, "v1", lambda: docs, with_lead)
    assert is_saved(tmp_path, "v1", with_lead) and not is_saved(tmp_path, "v1", FIRST_STAGE)
    plain_docs = [(f"p{i}", text) for i, (text, _) in enumerate(PAGES)]
    rebuilt = saved_index(tmp_path, "v1", lambda: plain_docs, FIRST_STAGE)  # another context: built again
    assert [doc for doc, _ in rebuilt.search("Lovelace")] == ["p0"]
    assert is_saved(tmp_path, "v1", FIRST_STAGE) and not is_saved(tmp_path, "v1", with_lead)  # the stale one deleted


def test_a_url_document_cited_by_several_pools_holds_each_sentence_once() -> None:
    """A CSV's URL may stand in several questions' pools: the repeat of a sentence is not its own
    neighbour, and the document's first row in the file is its first sentence."""
    from qa_core.services.candidate_pools import collection_passages

    url = "https://example.org/paris"
    rows = [("q1", "a", "Paris is big.", "csv", url), ("q1", "b", "It is the capital.", "csv", url),
            ("q2", "c", "It is the capital.", "csv", url), ("q2", "d", "It has a river.", "csv", url + "#geo")]
    indexed = dict(collection_passages(rows, FIRST_STAGE))
    assert indexed == {
        "q1/a": "Paris is big. It is the capital.",
        "q1/b": "It is the capital. Paris is big. It has a river.",
        "q2/d": "It has a river. Paris is big. It is the capital.",
    }


def _edit_array(folder: Path, name: str, edit) -> None:
    path = folder / f"{name}.csc.index.npy"
    array = np.load(path)
    np.save(path, edit(array))


def _swap_two_words(folder: Path) -> None:
    path = folder / "vocab.index.json"
    vocab = json.loads(path.read_text())
    first, second = sorted(vocab)[:2]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    path.write_text(json.dumps(vocab))


def _shuffle_doc_ids(folder: Path) -> None:
    path = folder / "doc_ids.json"
    path.write_text(json.dumps(list(reversed(json.loads(path.read_text())))))


def _another_collections_files(folder: Path) -> None:
    other = folder.parent.parent / "other"
    saved_index(other, "v1", lambda: CORPUS)
    (source,) = other.iterdir()
    for path in source.iterdir():
        if path.name != "manifest.json":
            shutil.copy(path, folder / path.name)
    for path in folder.iterdir():  # files of this index the other one lacks would not be read
        if not (source / path.name).exists():
            path.unlink()


READABLE_EDITS = {
    "scores x10": lambda folder: _edit_array(folder, "data", lambda data: data * 10),
    "scores reversed": lambda folder: _edit_array(folder, "data", lambda data: data[::-1]),
    "indices shuffled": lambda folder: _edit_array(folder, "indices", lambda indices: np.random.default_rng(0).permutation(indices)),
    "two vocabulary words swapped": _swap_two_words,
    "doc ids shuffled": _shuffle_doc_ids,
    "another collection's files": _another_collections_files,
}


@pytest.mark.parametrize("edit", READABLE_EDITS)
def test_an_edited_index_that_still_reads_is_rebuilt_never_served(tmp_path: Path, edit: str) -> None:
    """Issue 45: bm25s reads edited arrays as they are, so these gave other rankings without a word;
    the manifest's checksum of the files (and of the version) catches each."""
    folder = tmp_path / "bm25" / "demo"
    saved_index(folder, "v1", lambda: DEMO)
    (target,) = folder.iterdir()
    manifest = (target / "manifest.json").read_text()
    READABLE_EDITS[edit](target)
    assert (target / "manifest.json").read_text() == manifest and is_saved(folder, "v1")
    with pytest.warns(IndexRebuiltWarning, match=r"checksum differs\); rebuilding it"):
        rebuilt = saved_index(folder, "v1", lambda: DEMO)
    expected = BM25Index.build(DEMO)
    assert all(rebuilt.search(q, 50) == expected.search(q, 50) for q in DEMO_QUERIES)
    again = saved_index(folder, "v1", _must_not_build)  # the rebuilt one is saved and verifies
    assert all(again.search(q, 50) == expected.search(q, 50) for q in DEMO_QUERIES)


def test_the_checksum_covers_the_version_the_index_was_built_from(tmp_path: Path) -> None:
    """Version 1's files (the same sentences) under a manifest renamed to version 2 are not version 2's index."""
    folder = tmp_path / "bm25"
    saved_index(folder, "v1", lambda: DEMO)
    (old,) = folder.iterdir()
    kept = shutil.copytree(old, tmp_path / "v1-files")
    saved_index(folder, "v2", lambda: DEMO)
    (new,) = folder.iterdir()
    shutil.rmtree(new)
    shutil.copytree(kept, new)
    manifest = json.loads((new / "manifest.json").read_text())
    (new / "manifest.json").write_text(json.dumps({**manifest, "version": "v2"}))
    assert is_saved(folder, "v2")
    with pytest.warns(IndexRebuiltWarning, match="checksum differs"):
        saved_index(folder, "v2", lambda: DEMO)
