"""scripts/batch_score.py: streaming chunks, DataLoader parsing workers, a TREC run equal to
``Ranker.score`` on the same pairs; JSONL and TREC run inputs; bad input leaves no file."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.data.importers import read_trec_run
from qa_core.rankers import registry
from qa_core.rankers.base import Ranker
from qa_core.services import workbench
from qa_core.services.experiments import train_ranker

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("batch_score", ROOT / "scripts" / "batch_score.py")
batch_score = importlib.util.module_from_spec(_spec)
sys.modules["batch_score"] = batch_score  # workers send its PairRow records back by pickling
_spec.loader.exec_module(batch_score)

QUESTIONS = 4  # demo test questions in the fixture: 4 x 6-7 pairs, cut into chunks of >= 5 pairs


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("RERANK_LAB_DB", f"sqlite:///{tmp_path / 'store.sqlite'}")
    return tmp_path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("batch") / "smcnn.pt"
    train_ranker("smcnn", load_demo(), progress=False, checkpoint=path, model_config={"max_epochs": 1})
    return path


def demo_questions():
    return load_demo().split("test")[:QUESTIONS]


def write_pairs(path: Path) -> Path:
    with path.open("w") as handle:
        for q in demo_questions():
            for c in q.candidates:
                handle.write(json.dumps({"qid": q.qid, "question": q.text, "docid": c.doc_id, "text": c.text}) + "\n")
    return path


def expected_run(ranker: Ranker) -> dict[str, dict[str, float]]:
    """What ``Ranker.score`` gives for each question's pool, the reference for the batch output."""
    return {q.qid: dict(zip([c.doc_id for c in q.candidates], ranker.score(q.text, [c.text for c in q.candidates])))
            for q in demo_questions()}


def assert_same_run(out: Path, expected: dict[str, dict[str, float]]) -> None:
    run = read_trec_run(out)
    assert set(run) == set(expected)
    for qid, docs in run.items():
        assert {doc for doc, _, _ in docs} == set(expected[qid])
        for doc, _, score in docs:
            assert score == pytest.approx(expected[qid][doc], abs=1e-6)
        assert [rank for _, rank, _ in docs] == list(range(1, len(docs) + 1))
        assert [s for _, _, s in docs] == sorted((s for _, _, s in docs), reverse=True)


def test_jsonl_with_parsing_workers_equals_ranker_score(env: Path, checkpoint: Path, capsys):
    out = env / "smcnn.run"
    code = batch_score.main([str(write_pairs(env / "pairs.jsonl")), "--model", str(checkpoint), "--out", str(out),
                             "--workers", "2", "--chunk-pairs", "5", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["lines"] == sum(len(q.candidates) for q in demo_questions())
    assert_same_run(out, expected_run(registry.load(checkpoint)))


def test_trec_run_input_takes_texts_from_the_store(env: Path, capsys):
    store = Store(f"sqlite:///{env / 'store.sqlite'}")
    store.import_dataset(load_demo())
    first_stage = env / "bm25.run"
    first_stage.write_text("".join(f"{q.qid} Q0 {c.doc_id} {i} {10 - i} bm25\n"
                                   for q in demo_questions() for i, c in enumerate(q.candidates, start=1)))
    out = env / "overlap.run"
    code = batch_score.main([str(first_stage), "--data", "demo", "--model", "overlap", "--out", str(out),
                             "--workers", "0", "--chunk-pairs", "7"])
    assert code == 0, capsys.readouterr().err
    # The script loads a baseline as the app does: fitted (IDF) on the dataset named by --data.
    assert_same_run(out, expected_run(workbench.load_ranker(store, "overlap", "demo")))


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"qid": "a", "question": "q", "docid": "1", "text": "t"}', '{"qid": "b", "question": "q", "docid": "1", '
          '"text": "t"}', '{"qid": "a", "question": "q", "docid": "2", "text": "t"}'], "line 3: query a appears again"),
        (['{"qid": "a", "question": "q", "docid": "1", "text": "t"}', '{"qid": "a", "question": "q", "docid": "1"}'],
         "line 2: needs non-empty"),
    ],
    ids=["query-not-contiguous", "missing-text"],
)
def test_bad_input_is_one_line_and_writes_no_file(env: Path, capsys, lines: list[str], message: str):
    source = env / "pairs.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = env / "out.run"
    code = batch_score.main([str(source), "--model", "overlap", "--out", str(out), "--workers", "1",
                             "--chunk-pairs", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and not list(env.glob(".out.run*"))
