"""Importers, exporters and the demo corpus: real benchmark files, small fixtures, malformed input."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import ir_measures
import pytest

from qa_core.config import shared_data_dir
from qa_core.data.demo import DEMO_PATH, load_demo
from qa_core.data.exporters import write_jsonl, write_qrels, write_trec_run
from qa_core.data.importers import (
    FORMATS,
    detect_format,
    load_dataset,
    load_pairs,
    load_semeval,
    load_trecqa,
    load_wikiqa,
    read_qrels,
    read_trec_run,
)
from qa_core.text.nlp import parse
from qa_core.types import InputError

FIXTURES = Path(__file__).parent / "fixtures"
IMPORTERS = FIXTURES / "importers"
SEMEVAL_SMALL = FIXTURES / "semeval_small.xml"


def _shared(folder: str) -> Path:
    root = shared_data_dir()
    if root is None or not (root / folder).is_dir():
        pytest.skip(f"benchmark data {folder!r} not found beside the checkout (../shared/data/{folder})")
    return root / folder


def _split_counts(dataset) -> dict[str, tuple[int, int]]:
    return {s: (len(dataset.split(s)), sum(len(q.candidates) for q in dataset.split(s))) for s in dataset.splits}


def _error(call, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as caught:
        call(*args, **kwargs)
    return caught.value


def _assert_names(error: InputError, path: Path, line: int | None) -> None:
    """The message itself (what the user sees) names the file and, when given, the line."""
    assert error.path == str(path)
    assert error.line == line
    assert str(error).startswith(f"{path}, line {line}: " if line is not None else f"{path}: ")


# ------------------------------------------------------------------------------------ real data


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def test_real_wikiqa_counts_and_first_question():
    dataset = load_wikiqa(_shared("wikiqa"))
    assert _split_counts(dataset) == {"train": (873, 8672), "dev": (126, 1130), "test": (243, 2351)}
    first = dataset.questions[0]
    # Texts are pinned by hash: the licensed data's sentences are not copied into this repository.
    # The release is lowercased, so the loader restores case (see the fixture test below).
    assert (first.qid, first.split, _digest(first.text)) == ("train-1", "train", "33145e6d0bb90e79")
    assert first.candidates[0].doc_id == "train-1-0"
    assert _digest(first.candidates[0].text) == "520fb55876bcf757"
    assert {c.label for q in dataset.questions for c in q.candidates} == {0, 1}
    as_shipped = load_wikiqa(_shared("wikiqa"), restore_case=False).questions[0]
    assert (_digest(as_shipped.text), _digest(as_shipped.candidates[0].text)) == ("d03fae7d0d5edda3", "88b7f84d431411a0")
    assert first.text.lower() == as_shipped.text


def test_real_trecqa_counts_and_first_question():
    dataset = load_trecqa(_shared("trecqa"))
    assert _split_counts(dataset) == {"train": (94, 4718), "dev": (82, 1148), "test": (100, 1517)}
    labels = [c.label for q in dataset.split("train") for c in q.candidates]
    assert (labels.count(1), labels.count(0)) == (348, 4370)
    first = dataset.split("dev")[0]
    assert (first.qid, first.text) == ("1.4", "What ethnic group / race are Crip members ?")
    assert first.candidates[0].text.startswith("Prison gangs have a de facto negotiation system")
    assert first.candidates[0].label == 0


def test_auto_detection_on_real_folders():
    assert detect_format(_shared("wikiqa")) == "wikiqa"
    assert detect_format(_shared("trecqa")) == "trecqa"


# ------------------------------------------------------------------------------------- fixtures


def test_wikiqa_fixture_groups_by_id_and_orders_splits():
    dataset = load_dataset(IMPORTERS / "wikiqa", name="mini")
    assert dataset.name == "mini"
    assert [(q.qid, q.split, q.text) for q in dataset.questions] == [
        ("train-1", "train", "Who wrote Hamlet ?"),
        ("train-2", "train", "Where is Paris ?"),
        ("test-1", "test", "How tall is Everest ?"),
    ]
    hamlet = dataset.questions[0]
    assert [(c.doc_id, c.label) for c in hamlet.candidates] == [("train-1-0", 0), ("train-1-1", 1), ("train-1-2", 0)]
    single = load_wikiqa(IMPORTERS / "wikiqa" / "test")
    assert [q.qid for q in single.questions] == ["test-1"]


def test_lowercased_wikiqa_gets_its_case_back_token_by_token(tmp_path: Path):
    shipped = load_wikiqa(IMPORTERS / "wikiqa", restore_case=False)
    assert shipped.questions[0].text == "who wrote hamlet ?"
    restored = load_wikiqa(IMPORTERS / "wikiqa")
    for before, after in zip(shipped.questions, restored.questions, strict=True):
        for old, new in [(before.text, after.text), *((b.text, a.text) for b, a in zip(before.candidates, after.candidates))]:
            assert new.lower() == old and len(new.split()) == len(old.split())
    assert restored.questions[0].candidates[1].text == "Shakespeare wrote Hamlet around 1600 ."
    # The point of it: spaCy finds the mountain and the country only in the cased sentence.
    lowered, cased = (q.candidates[1].text for q in (shipped.questions[2], restored.questions[2]))
    assert [label for _, _, label in parse(cased).ents] == ["LOC", "GPE"] and parse(lowered).ents == ()
    # A folder with any uppercase letter was not lowercased: its text is kept as it is.
    folder = tmp_path / "cased"
    shutil.copytree(IMPORTERS / "wikiqa" / "test", folder)
    (folder / "b.toks").write_text("Everest is 8,849 m tall .\neverest is in nepal .\n")
    assert [c.text for c in load_wikiqa(folder).questions[0].candidates] == ["Everest is 8,849 m tall .", "everest is in nepal ."]


def test_trecqa_fixture_keeps_token_lines_only():
    dataset = load_trecqa(IMPORTERS / "trecqa")
    assert [(q.qid, q.split) for q in dataset.questions] == [("7.1", "train"), ("7.2", "train"), ("9.1", "test")]
    founded = dataset.questions[0]
    assert founded.text == "Who founded Rome ?"
    assert [(c.doc_id, c.text, c.label) for c in founded.candidates] == [
        ("7.1-0", "Romulus founded Rome in 753 BC .", 1),
        ("7.1-1", "Rome & its < hills .", 0),
    ]
    assert [c.label for c in dataset.questions[1].candidates] == [0, 0, 1]
    single = load_trecqa(IMPORTERS / "trecqa" / "TEST.xml")
    assert [(q.qid, q.split) for q in single.questions] == [("9.1", "test")]


def test_semeval_fixture_merges_repeated_questions():
    dataset = load_dataset(SEMEVAL_SMALL)
    assert dataset.name == "semeval"
    assert [q.qid for q in dataset.questions] == ["Q1", "Q2", "Q3"]
    visa = dataset.questions[0]
    assert visa.text == "Family visa How long does a family visa take to process in Doha?"
    assert visa.split == "train"
    assert [(c.doc_id, c.first_stage_rank, c.label) for c in visa.candidates] == [
        ("Q1_R1", 1, 1),
        ("Q1_R2", 2, 1),
        ("Q1_R3", 3, 0),
    ]
    assert visa.candidates[1].text == "Visa processing time My wife applied for a family visa two weeks ago. Is that normal?"
    beach = dataset.questions[1]
    assert [(c.text, c.label) for c in beach.candidates][1] == ("Beaches for kids", 1)


def test_pairs_csv_all_fields():
    dataset = load_pairs(IMPORTERS / "pairs.csv")
    assert dataset.name == "pairs"
    hamlet, paris = dataset.questions
    assert (hamlet.qid, hamlet.split, paris.qid, paris.split) == ("q1", "train", "q2", "dev")
    first, second = hamlet.candidates
    assert (first.doc_id, first.text, first.label, first.first_stage_rank, first.first_stage_score, first.url) == (
        "d1", "Hamlet is a tragedy, set in Denmark.", 0, 1, 3.5, None,
    )
    assert (second.label, second.url) == (2, "https://example.org/hamlet")
    assert paris.candidates[0].first_stage_rank is None


def test_pairs_jsonl_defaults():
    dataset = load_dataset(IMPORTERS / "pairs.jsonl")
    hamlet, paris = dataset.questions
    assert hamlet.qid.startswith("q") and len(hamlet.qid) == 13
    assert hamlet.qid == load_pairs(IMPORTERS / "pairs.jsonl").questions[0].qid  # stable
    assert [c.doc_id for c in hamlet.candidates] == [f"{hamlet.qid}-0", f"{hamlet.qid}-1"]
    assert (hamlet.split, paris.split) == ("train", "test")
    assert hamlet.candidates[1].first_stage_score == 0.5
    assert paris.candidates[0].first_stage_rank == 1


def test_trec_run_and_qrels_readers():
    assert read_trec_run(IMPORTERS / "run.txt") == {"q1": [("d1", 1, 2.75), ("d2", 2, 1.5)], "q2": [("d9", 1, -0.5)]}
    assert read_qrels(IMPORTERS / "qrels.txt") == {"q1": {"d1": 1, "d2": 0}, "q2": {"d9": 2}}


# ------------------------------------------------------------------------------------ malformed


@pytest.mark.parametrize(
    ("loader", "relative", "line", "words"),
    [
        (load_semeval, "semeval_truncated.xml", 21, "malformed XML"),
        (load_semeval, "semeval_bad_label.xml", 26, "unknown RELQ_RELEVANCE2ORGQ 'Maybe'"),
        (load_semeval, "semeval_doctype.xml", 2, "<!DOCTYPE> declarations are refused"),
        (load_trecqa, "trecqa_unclosed.xml", 24, "<negative> opened on line 18 is not closed"),
        (load_trecqa, "trecqa_unknown_tag.xml", 9, "'<answer>'"),
        (load_pairs, "pairs_bad_label.jsonl", 2, "label must be an integer 0..4, got 'true'"),
        (load_pairs, "pairs_duplicate.csv", 4, "duplicate candidate (q1, d1), first on line 2"),
        (read_trec_run, "run_bad.txt", 2, "expected 6 fields"),
        (read_qrels, "qrels_bad.txt", 3, "grade must be an integer, got 'high'"),
    ],
)
def test_malformed_fixture_names_file_and_line(loader, relative, line, words):
    path = IMPORTERS / relative
    error = _error(loader, path)
    _assert_names(error, path, line)
    assert words in str(error)


def test_wikiqa_mismatched_line_counts_name_the_short_file():
    folder = IMPORTERS / "wikiqa_mismatch" / "train"
    error = _error(load_wikiqa, folder.parent)
    _assert_names(error, folder / "sim.txt", 5)
    assert "4 lines but a.toks has 5" in str(error)


@pytest.mark.parametrize(
    ("name", "content", "line", "words"),
    [
        ("latin1.jsonl", b'{"question": "ok"}\n{"question": "caf\xe9"}\n', 2, "not UTF-8 text (byte 0xe9)"),
        ("binary.csv", b"question,candidate,label\n\x00\x01\x02\n", 2, "binary file (NUL byte found)"),
        ("utf16.xml", "<xml/>".encode("utf-16"), 1, "binary file"),
        ("empty.jsonl", b"", None, "file is empty"),
        ("blank.csv", b"\n  \n", None, "file is empty"),
    ],
)
def test_unreadable_bytes_are_rejected(tmp_path, name, content, line, words):
    path = tmp_path / name
    path.write_bytes(content)
    loader = load_semeval if name.endswith(".xml") else load_pairs
    error = _error(loader, path)
    _assert_names(error, path, line)
    assert words in str(error)


def test_unknown_format_lists_the_formats(tmp_path):
    error = _error(load_dataset, IMPORTERS / "pairs.csv", fmt="excel")
    assert str(error) == f"unknown format 'excel'; expected auto or one of {', '.join(FORMATS)}"
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello\n")
    error = _error(load_dataset, text_file)
    _assert_names(error, text_file, None)
    assert "wikiqa, trecqa, semeval, csv, jsonl" in str(error)


# ----------------------------------------------------------------------------------- exporters


def test_trec_runs_numbered_from_zero_or_with_gaps_read_as_positions(tmp_path):
    path = tmp_path / "zero.run"
    path.write_text("q1 Q0 b 4 1.0 t\nq1 Q0 a 0 3.0 t\nq1 Q0 c 9 0.5 t\n")
    assert read_trec_run(path) == {"q1": [("a", 1, 3.0), ("b", 2, 1.0), ("c", 3, 0.5)]}


def test_trec_run_round_trip_with_ties_in_trec_evals_order(tmp_path):
    run = {"q1": {"a": 0.5, "b": 0.5, "c": 2.0}, "q2": {"x": 1 / 3}}
    path = tmp_path / "out" / "run.txt"
    assert write_trec_run(run, path, tag="smcnn") == 4
    # ties by doc_id descending (qa_core.ordering), as trec_eval evaluates them
    assert path.read_text().splitlines()[:3] == ["q1 Q0 c 1 2.0 smcnn", "q1 Q0 b 2 0.5 smcnn", "q1 Q0 a 3 0.5 smcnn"]
    assert read_trec_run(path) == {"q1": [("c", 1, 2.0), ("b", 2, 0.5), ("a", 3, 0.5)], "q2": [("x", 1, 1 / 3)]}
    assert [p.name for p in path.parent.iterdir()] == ["run.txt"]  # no temporary file left behind


def test_gzipped_run_is_readable_by_ir_measures_and_byte_stable(tmp_path):
    run = {"q1": {"a": 0.5, "b": 2.0}}
    path = tmp_path / "run.gz"
    write_trec_run(run, path, tag="t")
    first = path.read_bytes()
    assert first[:2] == b"\x1f\x8b"  # gzip magic
    assert [(d.query_id, d.doc_id, d.score) for d in ir_measures.read_trec_run(str(path))] == [
        ("q1", "b", 2.0), ("q1", "a", 0.5)]
    write_trec_run(run, path, tag="t")
    assert path.read_bytes() == first  # no timestamp in the header


def test_qrels_and_jsonl_round_trip(tmp_path):
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    assert write_qrels(qrels, tmp_path / "qrels.txt") == 3
    assert read_qrels(tmp_path / "qrels.txt") == qrels
    rows = [{"qid": "q1", "question": "Où est Paris ?", "candidate": "Paris est en France.", "label": 1}]
    assert write_jsonl(iter(rows), tmp_path / "rows.jsonl") == 1
    assert "Où" in (tmp_path / "rows.jsonl").read_text(encoding="utf-8")
    assert load_pairs(tmp_path / "rows.jsonl").questions[0].candidates[0].text == "Paris est en France."


def test_failed_export_keeps_the_old_file(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("old\n")
    with pytest.raises(InputError, match="document id 'has space'"):
        write_trec_run({"q1": {"ok": 1.0, "has space": 0.5}}, path, tag="t")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.txt"]


# ---------------------------------------------------------------------------------------- demo


def test_demo_corpus_shape():
    demo = load_demo()
    assert demo.name == "demo" and demo.source == str(DEMO_PATH)
    assert {s: len(demo.split(s)) for s in demo.splits} == {"dev": 28, "test": 28, "train": 139}
    assert demo.questions[0].text == "Who painted the Mona Lisa?"
    for question in demo.questions:
        labels = [c.label for c in question.candidates]
        assert 5 <= len(labels) <= 10, question.qid
        assert 1 <= labels.count(1) <= 2 and set(labels) == {0, 1}, question.qid
    rows = [json.loads(line) for line in DEMO_PATH.read_text(encoding="utf-8").splitlines()]
    assert {tuple(sorted(row)) for row in rows} == {("candidate", "doc_id", "label", "qid", "question", "split")}


def test_a_too_long_wikiqa_candidate_is_named_by_question_and_candidate(tmp_path: Path):
    folder = tmp_path / "wikiqa"
    shutil.copytree(IMPORTERS / "wikiqa", folder)
    answers = folder / "test" / "b.toks"
    answers.write_text(answers.read_text().replace("everest is in nepal .", "nepal " * 1_000))
    with pytest.raises(InputError, match=r"question test-1, candidate test-1-1: the candidate is too long \(5,999 characters") as error:
        load_dataset(folder, name="mini")
    assert error.value.path == str(folder)


def test_a_collection_too_large_for_the_memory_is_refused_at_import_with_an_estimate(cli_env, capsys, monkeypatch):
    from tests.cli import run_cli

    candidates = sum(len(question.candidates) for question in load_demo().questions)
    monkeypatch.setenv("RERANK_LAB_MEMORY_MB", "50")  # a machine far too small for even the demo
    code, _, err = run_cli("data", "import", str(DEMO_PATH), "--name", "big", capsys=capsys)
    assert code == 2 and "Traceback" not in err
    assert DEMO_PATH.name in err and "too large for this machine" in err
    assert f"{candidates:,} candidates need about" in err and "and 50 MB is available" in err
    assert "big" not in run_cli("data", "list", capsys=capsys)[1]
    monkeypatch.setenv("RERANK_LAB_MEMORY_MB", "100000")
    assert len(load_dataset(DEMO_PATH).questions) == len(load_demo().questions)
