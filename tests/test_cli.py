"""The command line end to end: real store (SQLite), real spaCy, real training, one process each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from db.store import Store
from tests import ROOT
from tests.cli import run_cli


def test_demo_train_evaluate_rank(cli_env, capsys):
    assert run_cli("data", "demo", capsys=capsys)[0] == 0

    code, out, _ = run_cli("train", "--model", "smcnn", "--data", "demo", "--seed", "3", capsys=capsys)
    assert code == 0
    trained = json.loads(out.strip().splitlines()[-1])
    assert trained["version"] == 1 and Path(trained["checkpoint"]).is_file()

    code, out, _ = run_cli("evaluate", "--model", "smcnn", "--data", "demo", "--split", "test", capsys=capsys)
    assert code == 0
    line = json.loads(out)
    assert set(line) >= {"map", "mrr", "p@1", "ndcg@10", "questions", "clean"}
    assert line["clean"] is False and line["questions"] > 0
    assert 0.0 < line["map"] <= 1.0
    stored = Store(f"sqlite:///{cli_env / 'store.sqlite'}")
    saved = next(run for run in stored.runs.runs("demo") if run["id"] == line["run_id"])
    assert saved["model_version_id"] == trained["model_version_id"] and saved["metrics"]["map"] == line["map"]
    assert stored.runs.load_run(line["run_id"]).keys() == {q.qid for q in stored.datasets.load_dataset("demo").split("test")}

    code, out, _ = run_cli("evaluate", "--model", trained["checkpoint"], "--data", "demo", "--clean", capsys=capsys)
    assert code == 0 and json.loads(out)["clean"] is True

    code, out, _ = run_cli("rank", "who wrote the adventures of tom sawyer", "--data", "demo",
                           "--model", "smcnn", "--top", "3", capsys=capsys)
    assert code == 0
    assert len(out.strip().splitlines()) == 3


def test_import_export_round_trip(cli_env, capsys, tmp_path):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("qid,question,doc_id,candidate,label,split\n"
                     "q1,who wrote hamlet,d1,Shakespeare wrote Hamlet.,1,test\n"
                     "q1,who wrote hamlet,d2,Hamlet is a play.,0,test\n")
    code, out, err = run_cli("data", "import", str(pairs), "--name", "tiny", capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["imported"] == "tiny"

    qrels = tmp_path / "gold.qrels"
    assert run_cli("data", "export", "--data", "tiny", "--source", "gold", "--out", str(qrels), capsys=capsys)[0] == 0
    assert sorted(qrels.read_text().split("\n")[:-1]) == ["q1 0 d1 1", "q1 0 d2 0"]

    code, out, _ = run_cli("evaluate", "--model", "overlap", "--data", "tiny", capsys=capsys)
    assert code == 0 and json.loads(out)["map"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "args, message",
    [
        (["rank", "   ", "--data", "demo"], "empty"),
        (["evaluate", "--model", "smcnn", "--data", "demo"], "train"),
        (["evaluate", "--model", "nosuchmodel", "--data", "demo"], "unknown model"),
        (["evaluate", "--model", "overlap", "--data", "nosuchdata"], "nosuchdata"),
        (["evaluate", "--model", "/nonexistent/model.pt", "--data", "demo"], "not found"),
    ],
)
def test_bad_input_gives_one_clear_line(cli_env, capsys, args, message):
    assert run_cli("data", "demo", capsys=capsys)[0] == 0
    code, _, err = run_cli(*args, capsys=capsys)
    assert code == 2
    assert err.startswith("error: ") and message in err.lower()
    assert "Traceback" not in err


def test_malformed_file_names_file_and_line_and_imports_nothing(cli_env, capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "candidate": "c", "label": 1}\n{not json\n')
    code, _, err = run_cli("data", "import", str(bad), capsys=capsys)
    assert code == 2 and "bad.jsonl" in err and "line 2" in err
    code, out, _ = run_cli("data", "list", capsys=capsys)
    assert code == 0 and "bad" not in out


def test_module_entry_point_runs_as_a_process(cli_env):
    result = subprocess.run([sys.executable, "-m", "qa_core", "rank", ""], cwd=ROOT, env=os.environ.copy(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr


def test_import_qrels_adds_labels_and_a_bad_file_adds_none(cli_env, capsys, tmp_path):
    assert run_cli("data", "demo", capsys=capsys)[0] == 0
    good = tmp_path / "judged.qrels"
    good.write_text("demo-01 0 demo-01-0 2\ndemo-01 0 demo-01-1 0\n")
    code, out, err = run_cli("data", "import-qrels", str(good), "--data", "demo", "--annotator", "ann", capsys=capsys)
    assert code == 0, err
    assert json.loads(out) == {"labels": 2, "unchanged": 0, "annotator": "ann"}

    bad = tmp_path / "bad.qrels"
    bad.write_text("demo-01 0 demo-01-2 1\ndemo-01 0 no-such-doc 1\n")
    code, _, err = run_cli("data", "import-qrels", str(bad), "--data", "demo", capsys=capsys)
    assert code == 2 and "no-such-doc" in err

    exported = tmp_path / "labels.qrels"
    assert run_cli("data", "export", "--data", "demo", "--out", str(exported), capsys=capsys)[0] == 0
    assert sorted(exported.read_text().splitlines()) == ["demo-01 0 demo-01-0 2", "demo-01 0 demo-01-1 0"]


def test_data_demo_adds_the_demo_beside_other_datasets(cli_env, capsys, tmp_path):
    """`make run` calls `data demo` then trains on it: a store that already holds other datasets
    (WikiQA imported first, say) must get the demo too, or the first `make run` fails."""
    pairs = tmp_path / "mine.csv"
    pairs.write_text("question,candidate,label\nwho wrote hamlet,Shakespeare wrote Hamlet.,1\n")
    assert run_cli("data", "import", str(pairs), "--name", "mine", capsys=capsys)[0] == 0
    code, out, _ = run_cli("data", "demo", capsys=capsys)
    assert code == 0 and json.loads(out)["datasets"] == ["demo", "mine"]
    code, out, _ = run_cli("data", "demo", capsys=capsys)  # again: nothing more
    assert code == 0 and json.loads(out)["datasets"] == ["demo", "mine"]
