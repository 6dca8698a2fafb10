"""Bit-identical training (qa_core.training.reproducibility) in this process, a job's process and a
worker, and ``python -m qa_core reproduce``, on the demo corpus with a tiny SM-CNN (two epochs,
eight filters: seconds)."""

from __future__ import annotations

import json
import os
import sys

import torch

from db.base import NewVersion
from db.store import Store
from qa_core.checkpoints import new_checkpoint_path
from qa_core.services import jobs
from qa_core.services.experiments import EVAL_SPLIT, train_ranker, version_record
from tests.cli import run_cli

TINY = {"max_epochs": 2, "filters": 8}
def _register(store: Store, seed: int, recorded_seed: int, training_hash: bool = True) -> None:
    """A version trained with ``seed`` whose record says ``recorded_seed`` (without
    ``training_hash``: as versions from before the record kept the checkpoint's hash)."""
    dataset = store.datasets.load_dataset("demo")
    outcome = train_ranker("smcnn", dataset, seed=seed, progress=False, model_config=TINY,
                           checkpoint=new_checkpoint_path("smcnn", "demo", f"seed{seed}", owner=store.store_id))
    training_data, metrics = version_record(outcome, dataset, dataset.split(EVAL_SPLIT), seed=recorded_seed,
                                            train_split="train", dev_split="dev", extra={"labels": "gold"})
    if not training_hash:
        del training_data["reproducibility"]["checkpoint_sha256"]
    store.models.register_model("smcnn", NewVersion("smcnn", str(outcome.checkpoint), training_data, metrics))


def test_training_paths_agree_and_reproduce_says_what_differs(cli_env, capsys, monkeypatch):
    assert run_cli("data", "demo", capsys=capsys)[0] == 0
    store = Store(os.environ["RERANK_LAB_DB"])
    threads = torch.get_num_threads()
    _register(store, seed=5, recorded_seed=5)
    assert torch.get_num_threads() == threads  # training gives the process its thread count back

    # The Train page's job (its own process, another hash seed: a set's order once followed it into
    # the checkpoint) and a worker train the same bytes as this process did. Registering stamps each
    # file with its version id, so the bytes compared are the ones training wrote (their recorded hash).
    first = store.models.model_versions("smcnn")[0]["training_data"]["reproducibility"]["checkpoint_sha256"]
    monkeypatch.setenv("PYTHONHASHSEED", "1" if sys.flags.hash_randomization else "2")
    for runner in ("process", "worker"):
        job_id = jobs.start_training_job(store, "smcnn", "demo", store_labels=False, gold=True, seed=5,
                                         model_config=TINY, runner=runner)
        if runner == "worker":
            assert run_cli("worker", "--until-idle", "--max-jobs", "1", capsys=capsys)[0] == 0
        job = jobs.wait_for_job(store, job_id, 300)
        assert job["status"] == "succeeded", job["error"]
        version = store.models.model_version(job["model_version_id"])
        assert version["training_data"]["reproducibility"]["checkpoint_sha256"] == first
        assert version["metrics"]["dev_map"] == store.models.model_versions("smcnn")[0]["metrics"]["dev_map"]
    record = version["training_data"]["reproducibility"]
    assert record["threads"] == 1 and record["seed"] == 5 and record["deterministic_algorithms"] is True
    assert record["settings"]["max_epochs"] == 2 and record["settings"]["filters"] == 8
    assert set(record["data_fingerprint"]) == {"train", "dev"} and "torch" in record["libraries"]
    assert record["code_commit"] and record["checkpoint_sha256"]

    code, out, _ = run_cli("reproduce", "--model", "smcnn", "--data", "demo", "--version", "1", "--quiet",
                           capsys=capsys)
    line = json.loads(out)
    assert code == 0 and line["identical"] and line["weights_identical"] and line["data_identical"]
    assert line["max_weight_difference"] == 0.0 and line["notes"] == []
    assert {"dev_map", "test_gold_map"} <= set(line["metrics"])
    assert all(m["difference"] == 0.0 and m["stored"] == m["retrained"] for m in line["metrics"].values())

    _register(store, seed=6, recorded_seed=5)  # its weights are not what its record trains
    code, out, _ = run_cli("reproduce", "--model", "smcnn", "--data", "demo", "--version", "4", "--quiet",
                           capsys=capsys)
    line = json.loads(out)
    assert code == 1 and not line["identical"] and not line["weights_identical"]
    assert line["max_weight_difference"] > 0

    # No training hash recorded: the weights are compared, not the registered (stamped) file's hash.
    _register(store, seed=5, recorded_seed=5, training_hash=False)
    code, out, _ = run_cli("reproduce", "--model", "smcnn", "--data", "demo", "--version", "5", "--quiet",
                           capsys=capsys)
    line = json.loads(out)
    assert code == 0 and line["identical"] and line["weights_identical"] and line["max_weight_difference"] == 0.0

    code, _, err = run_cli("reproduce", "--model", "smcnn", "--data", "demo", "--version", "9", capsys=capsys)
    assert code == 2 and "no version 9" in err and "versions: 1, 2, 3, 4, 5" in err
    code, _, err = run_cli("reproduce", "--model", "smcnn", "--data", "wikiqa", "--version", "1", capsys=capsys)
    assert code == 2 and "trained on 'demo', not 'wikiqa'" in err
