"""``python -m qa_core batch-score`` with the local engine: streaming chunks, DataLoader parsing
workers, a TREC run equal to ``Ranker.score`` on the same pools of ``Candidate`` records (first-stage
rank and URL included); JSONL and TREC run inputs; bad input leaves no file (on either engine)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from db.base import NewVersion
from db.store import Store
from qa_core.cli import main
from qa_core.data.demo import load_demo
from qa_core.data.importers import read_trec_run
from qa_core.rankers.base import Pool, Ranker
from qa_core.services import batch, model_loading
from qa_core.services.batch_chunks import BatchRequest, store_texts
from qa_core.services.experiments import train_ranker
from qa_core.types import Candidate
from tests.conftest import copy_to_models

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
            for rank, c in enumerate(q.candidates, start=1):
                handle.write(json.dumps({"qid": q.qid, "question": q.text, "docid": c.doc_id, "text": c.text,
                                         "rank": rank, "url": f"https://example.org/{c.doc_id}"}) + "\n")
    return path


def expected_run(ranker: Ranker) -> dict[str, dict[str, float]]:
    """What ``Ranker.score`` gives for each question's pool of records (rank by position, URL as in
    ``write_pairs``): the reference for the batch output."""
    run = {}
    for q in demo_questions():
        records = [Candidate(c.doc_id, c.text, first_stage_rank=rank, url=f"https://example.org/{c.doc_id}")
                   for rank, c in enumerate(q.candidates, start=1)]
        run[q.qid] = dict(zip([c.doc_id for c in records], ranker.score(q.text, records)))
    return run


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
    from qa_core.rankers import registry

    out = env / "smcnn.run"
    code = main(["batch-score", str(write_pairs(env / "pairs.jsonl")), "--model", str(checkpoint), "--out", str(out),
                 "--workers", "2", "--chunk-pairs", "5", "--device", "cpu", "--quiet"])
    assert code == 0, capsys.readouterr().err
    line = json.loads(capsys.readouterr().out)
    assert line["lines"] == line["pairs"] == sum(len(q.candidates) for q in demo_questions())
    assert (line["engine"], line["workers"], line["model"]) == ("local", 2, "smcnn")
    assert_same_run(out, expected_run(registry.load(checkpoint)))


class RecordReader(Ranker):
    """Scores what a batch job must pass besides the texts: rank x 1000 + the URL's length."""

    name = "record_reader"  # not registered: defined outside qa_core.rankers
    title = "test ranker"

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        return [np.array([c.first_stage_rank * 1000.0 + len(c.url or "") for c in candidates]) for _, candidates in pools]

    def explain(self, question, candidates, index):
        raise NotImplementedError


def test_pools_are_candidate_records_with_rank_and_url(env: Path):
    """A model reading the first-stage rank (attention LSTM) or the URL (MP-HCNN) gets them."""
    out = env / "records.run"
    request = BatchRequest(write_pairs(env / "pairs.jsonl"), out, workers=1, chunk_pairs=3, quiet=True)
    result = batch.batch_score(request, RecordReader())
    assert result.lines == result.pairs == sum(len(q.candidates) for q in demo_questions())
    assert_same_run(out, expected_run(RecordReader()))


def test_trec_run_input_takes_texts_from_the_store(env: Path, capsys):
    store = Store(f"sqlite:///{env / 'store.sqlite'}")
    store.datasets.import_dataset(load_demo())
    first_stage = env / "bm25.run"
    first_stage.write_text("".join(f"{q.qid} Q0 {c.doc_id} {i} {10 - i} bm25\n"
                                   for q in demo_questions() for i, c in enumerate(q.candidates, start=1)))
    out = env / "overlap.run"
    code = main(["batch-score", str(first_stage), "--data", "demo", "--model", "overlap", "--out", str(out),
                 "--workers", "0", "--chunk-pairs", "7", "--quiet"])
    assert code == 0, capsys.readouterr().err
    # A baseline is loaded as the app loads it: fitted (IDF) on the dataset named by --data.
    ranker = model_loading.load_ranker(store, "overlap", "demo")
    expected = {q.qid: dict(zip([c.doc_id for c in q.candidates], ranker.score(q.text, q.candidates)))
                for q in demo_questions()}
    assert_same_run(out, expected)
    assert store_texts(store, "demo")["demo-01"][1]["demo-01-0"][0].startswith("Leonardo")


def test_a_trained_model_scores_with_the_version_in_use_for_data(env: Path, checkpoint: Path, capsys):
    """``--data`` picks the version promoted for that dataset; JSONL pairs keep their own texts."""
    from qa_core.rankers import registry

    store = Store(f"sqlite:///{env / 'store.sqlite'}")
    store.datasets.import_dataset(load_demo())
    store.models.register_model("smcnn", NewVersion("smcnn", copy_to_models(checkpoint), {"dataset": "demo"}, {}, promote=True))
    pairs, out = write_pairs(env / "pairs.jsonl"), env / "smcnn.run"
    assert main(["batch-score", str(pairs), "--model", "smcnn", "--data", "demo", "--out", str(out), "--workers", "0",
                 "--quiet"]) == 0, capsys.readouterr().err
    assert_same_run(out, expected_run(registry.load(checkpoint)))
    first_stage = env / "bm25.run"
    first_stage.write_text("demo-01 Q0 demo-01-0 1 2.5 bm25\n")
    for command, message in [(["--model", "smcnn"], "say which dataset"),
                             (["--model", "overlap", "--data", "nosuch"], "nosuch"),
                             ([str(first_stage), "--model", "overlap"], "line 1 is no JSON object")]:
        source = [] if command[0].startswith("/") else [str(pairs)]
        code = main(["batch-score", *source, *command, "--out", str(env / "o.run"), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (env / "o.run").exists()


@pytest.mark.parametrize("engine", ["local", "ray"])
@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"qid": "a", "question": "q", "docid": "1", "text": "t"}', '{"qid": "b", "question": "q", "docid": "1", '
          '"text": "t"}', '{"qid": "a", "question": "q", "docid": "2", "text": "t"}'], "line 3: query a appears again"),
        (['{"qid": "a", "question": "q", "docid": "1", "text": "t"}', '{"qid": "a", "question": "q", "docid": "1"}'],
         "line 2: needs non-empty"),
        (['{"qid": "a", "question": "q", "docid": "1", "text": "t", "rank": 0}'], "line 1: rank must be"),
        (['{"qid": "a", "question": "q", "docid": "1", "text": "t"}', '{"qid": "a", "question": "q", "docid": "1", '
          '"text": "u"}'], "line 2: document 1 appears twice"),
    ],
    ids=["query-not-contiguous", "missing-text", "rank-zero", "docid-twice"],
)
def test_bad_input_is_one_line_and_writes_no_file(env: Path, capsys, lines: list[str], message: str, engine: str):
    """On Ray too the input is checked before any cluster is started or joined."""
    source = env / "pairs.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = env / "out.run"
    code = main(["batch-score", str(source), "--model", "overlap", "--out", str(out), "--workers", "1",
                 "--chunk-pairs", "1", "--engine", engine, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and not list(env.glob(".out.run*"))


def test_not_utf8_and_bad_options_are_input_errors(env: Path, capsys):
    source = env / "pairs.jsonl"
    source.write_bytes(b'{"qid": "a", "question": "q", "docid": "1", "text": "t"}\n{"qid": "\xff"}\n')
    for extra, message in [([], "line 2: not UTF-8"), (["--address", "127.0.0.1:1"], "needs --engine ray"),
                           (["--workers", "-1"], "--workers must be at least 0")]:
        code = main(["batch-score", str(source), "--model", "overlap", "--out", str(env / "o.run"), "--quiet", *extra])
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err, err
    assert not (env / "o.run").exists()
