"""`python -m qa_core compare` on real TREC run files written here (plain and gzipped) and a registered
model, against the demo corpus in a real SQLite store."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.significance import RANDOMISATION
from tests import ROOT
from tests.cli import run_cli

TEST_SPLIT = load_demo().split("test")


def write_run(path, flip: bool) -> None:
    """A TREC run over the demo's test split: the gold answers first (or, with ``flip``, last), no ties."""
    lines = []
    for question in TEST_SPLIT:
        for i, candidate in enumerate(question.candidates):
            score = (1 - 2 * flip) * candidate.label + i / 100
            lines.append(f"{question.qid} Q0 {candidate.doc_id} 0 {score} {'flipped' if flip else 'oracle'}")
    text = "\n".join(lines) + "\n"
    path.write_bytes(gzip.compress(text.encode())) if path.suffix == ".gz" else path.write_text(text)


@pytest.fixture
def runs(cli_env, capsys):
    assert run_cli("data", "demo", capsys=capsys)[0] == 0
    oracle, flipped = cli_env / "oracle.run", cli_env / "flipped.run.gz"
    write_run(oracle, flip=False)
    write_run(flipped, flip=True)
    return str(oracle), str(flipped)


def test_compare_run_files_and_a_model_as_json(runs, capsys):
    oracle, flipped = runs
    code, out, err = run_cli("compare", oracle, flipped, "bm25", "--data", "demo", "--split", "test",
                             "--format", "json", capsys=capsys)
    assert code == 0, err
    record = json.loads(out)
    assert record["questions"] == len(TEST_SPLIT) == 28
    assert record["systems"][oracle]["map"]["mean"] == 1.0  # every test question has a gold answer
    assert record["systems"][oracle]["map"]["ci"] == [1.0, 1.0]
    assert record["systems"][flipped]["p@1"]["mean"] == 0.0
    assert 0.0 < record["systems"]["bm25"]["map"]["mean"] < 1.0
    pairs = [pair for pair in record["pairs"] if pair["metric"] == "map"]
    assert [(p["vs"], p["model"]) for p in pairs] == [(oracle, flipped), (oracle, "bm25"), (flipped, "bm25")]
    oracle_vs_flipped = pairs[0]
    assert (oracle_vs_flipped["wins"], oracle_vs_flipped["losses"]) == (0, 28)
    # 28 questions, all lost: 2^28 swaps are too many to enumerate, so 10,000 seeded draws, of which
    # (almost surely: 2 in 2^28) none reaches |mean|; scipy's two-sided p is then 2 (0 + 1) / (10,000 + 1).
    # Holm over the three pairs multiplies the smallest p by at most 3.
    assert oracle_vs_flipped[f"{RANDOMISATION} p"] == pytest.approx(2 / 10_001)
    assert oracle_vs_flipped[f"{RANDOMISATION} p"] <= oracle_vs_flipped[f"{RANDOMISATION} p (Holm)"] <= 3 * 2 / 10_001
    assert oracle_vs_flipped["MDD"] > 0 and oracle_vs_flipped["verdict"].startswith("significant")


@pytest.mark.parametrize("fmt, marker", [("table", "randomisation p (Holm)"), ("markdown", "|:"),
                                         ("latex", "\\begin{tabular}")])
def test_compare_prints_each_format(runs, capsys, fmt, marker):
    code, out, _ = run_cli("compare", *runs, "--data", "demo", "--metric", "map", "--format", fmt, capsys=capsys)
    assert code == 0 and marker in out
    assert "MRR" not in out and "MAP" in out  # only the metric asked for


def test_compare_bad_input_is_one_error_line(runs, capsys, cli_env):
    oracle, _ = runs
    code, _, err = run_cli("compare", oracle, "no-such-model", "--data", "demo", capsys=capsys)
    assert code == 2 and err.startswith("error: 'no-such-model' is neither a run file nor a registered model")
    broken = cli_env / "broken.run"
    broken.write_text("demo-33 Q0 demo-33-0 1 0.5 x\ndemo-33 Q0 demo-33-1 one 0.4 x\n")
    code, _, err = run_cli("compare", oracle, str(broken), "--data", "demo", capsys=capsys)
    assert code == 2 and "broken.run" in err and "line 2" in err and len(err.strip().splitlines()) == 1
    other = cli_env / "other.run"
    other.write_text("q-unknown Q0 d1 1 0.5 x\n")
    code, _, err = run_cli("compare", oracle, str(other), "--data", "demo", capsys=capsys)
    assert code == 2 and "no question of split 'test'" in err
    code, _, err = run_cli("compare", oracle, oracle, "--data", "demo", capsys=capsys)
    assert code == 2 and "named twice" in err
    code, _, err = run_cli("compare", oracle, "smcnn", "--data", "demo", capsys=capsys)
    assert code == 2 and "python -m qa_core train --model smcnn --data demo" in err
    assert Store(f"sqlite:///{cli_env / 'store.sqlite'}").runs.runs() == []  # comparing writes nothing


def test_compare_as_a_process(runs, cli_env):
    """The module entry point prints the plain table (what a user types)."""
    result = subprocess.run([sys.executable, "-m", "qa_core", "compare", *runs, "--data", "demo", "--metric", "map"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    header = next(line for line in result.stdout.splitlines() if "randomisation p" in line)
    assert header.split()[:3] == ["metric", "model", "vs"]
