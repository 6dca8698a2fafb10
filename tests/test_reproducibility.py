"""Bit-identical training (qa_core.training.reproducibility) and ``python -m qa_core reproduce``,
on the demo corpus with a tiny SM-CNN (two epochs, eight filters: seconds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

from db.store import Store
from qa_core.checkpoints import new_checkpoint_path
from qa_core.services.experiments import EVAL_SPLIT, train_ranker, version_record
from tests import ROOT
from tests.cli import run_cli

TINY = {"max_epochs": 2, "filters": 8}
TRAIN_IN_A_PROCESS = f"""
import json, sys
from pathlib import Path
from qa_core.data.demo import load_demo
from qa_core.services.experiments import train_ranker
outcome = train_ranker("smcnn", load_demo(), seed=5, progress=False, checkpoint=Path(sys.argv[1]), model_config={TINY!r})
print(json.dumps({{"metrics": outcome.metrics, "record": outcome.provenance}}))
"""


def test_two_trainings_in_separate_processes_write_the_same_checkpoint_bytes(tmp_path):
    results = []
    for attempt in (1, 2):
        # Other hash seeds on purpose: a set's order followed them into the checkpoint once.
        env = {**os.environ, "RERANK_LAB_DATA": str(tmp_path / "data"), "PYTHONHASHSEED": str(attempt)}
        done = subprocess.run([sys.executable, "-c", TRAIN_IN_A_PROCESS, str(tmp_path / f"{attempt}.pt")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert (tmp_path / "1.pt").read_bytes() == (tmp_path / "2.pt").read_bytes()
    assert results[0]["metrics"] == results[1]["metrics"]
    record = results[0]["record"]
    assert record == results[1]["record"]
    assert record["threads"] == 1 and record["seed"] == 5 and record["deterministic_algorithms"] is True
    assert record["settings"]["max_epochs"] == 2 and record["settings"]["filters"] == 8
    assert set(record["data_fingerprint"]) == {"train", "dev"} and "torch" in record["libraries"]


def _register(store: Store, seed: int, recorded_seed: int) -> None:
    """A version trained with ``seed`` whose record says ``recorded_seed``."""
    dataset = store.load_dataset("demo")
    outcome = train_ranker("smcnn", dataset, seed=seed, progress=False, model_config=TINY,
                           checkpoint=new_checkpoint_path("smcnn", "demo", f"seed{seed}", owner=store.store_id))
    training_data, metrics = version_record(outcome, dataset, dataset.split(EVAL_SPLIT), seed=recorded_seed,
                                            train_split="train", dev_split="dev", extra={"labels": "gold"})
    store.register_model("smcnn", kind="smcnn", checkpoint_path=str(outcome.checkpoint),
                         training_data=training_data, metrics=metrics)


def test_reproduce_retrains_a_demo_version_and_says_what_differs(cli_env, capsys):
    assert run_cli("data", "demo", capsys=capsys)[0] == 0
    store = Store(os.environ["RERANK_LAB_DB"])
    threads = torch.get_num_threads()
    _register(store, seed=5, recorded_seed=5)
    assert torch.get_num_threads() == threads  # training gives the process its thread count back

    code, out, _ = run_cli("reproduce", "--model", "smcnn", "--data", "demo", "--version", "1", "--quiet",
                           capsys=capsys)
    line = json.loads(out)
    assert code == 0 and line["identical"] and line["weights_identical"] and line["data_identical"]
    assert line["max_weight_difference"] == 0.0 and line["notes"] == []
    assert {"dev_map", "test_gold_map"} <= set(line["metrics"])
    assert all(m["difference"] == 0.0 and m["stored"] == m["retrained"] for m in line["metrics"].values())

    _register(store, seed=6, recorded_seed=5)  # its weights are not what its record trains
    code, out, _ = run_cli("reproduce", "--model", "smcnn", "--data", "demo", "--version", "2", "--quiet",
                           capsys=capsys)
    line = json.loads(out)
    assert code == 1 and not line["identical"] and not line["weights_identical"]
    assert line["max_weight_difference"] > 0

    code, _, err = run_cli("reproduce", "--model", "smcnn", "--data", "demo", "--version", "9", capsys=capsys)
    assert code == 2 and "no version 9" in err and "versions: 1, 2" in err
    code, _, err = run_cli("reproduce", "--model", "smcnn", "--data", "wikiqa", "--version", "1", capsys=capsys)
    assert code == 2 and "trained on 'demo', not 'wikiqa'" in err
