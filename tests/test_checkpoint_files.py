"""Checkpoint files: names unique per store and built from sanitised parts only, every file
inside the data folder, two stores sharing a folder never touching each other's models, and
``python -m qa_core gc`` removing what killed trainings leave and nothing else."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest

from db.base import NewVersion
from db.store import Store
from qa_core import config
from qa_core.checkpoints import collect_garbage, new_checkpoint_path
from qa_core.data.demo import load_demo
from qa_core.rankers import registry
from qa_core.services import jobs
from qa_core.services.experiments import train_ranker
from qa_core.types import InputError
from tests import ROOT
from tests.killed_trainings import killed_before_registering, killed_while_writing

FAST = {"max_epochs": 1}
EVIL = "../../../../x/evil"
HOUR = 3600


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setenv("RERANK_LAB_DATA", str(folder))
    return folder


@pytest.mark.parametrize("name", [EVIL, "/etc/passwd", "..", "a b/c\\d", "\u00e9t\u00e9 \u2603", "x" * 500, ""])
def test_checkpoint_names_are_sanitised_and_stay_in_the_data_folder(data_dir: Path, name: str) -> None:
    path = new_checkpoint_path("smcnn", name, "job1", owner="0123456789ab")
    assert path.parent == data_dir / "models" and path.resolve().is_relative_to(data_dir.resolve())
    assert path.name.count(".") == 3 and "/" not in path.name and ".." not in path.name and len(path.name) < 120
    assert new_checkpoint_path("smcnn", name, "job1", owner="0123456789ab") != path  # unique every time


def test_a_path_outside_the_data_folder_is_refused(data_dir: Path) -> None:
    with pytest.raises(InputError, match="outside the data folder"):
        config.inside_data_dir(data_dir / "models" / ".." / ".." / "elsewhere.pt")


def test_training_on_a_dataset_named_like_a_path_writes_inside_the_data_folder(data_dir: Path, tmp_path: Path) -> None:
    dataset = load_demo()
    dataset.name = EVIL
    outcome = train_ranker("smcnn", dataset, progress=False, model_config=FAST)
    assert outcome.checkpoint.parent == data_dir / "models" and outcome.checkpoint.is_file()
    assert not (tmp_path / "x").exists() and not Path("/x/evil").exists()


def run_demo_job(store: Store) -> dict:
    """A real training job of SM-CNN on the demo corpus, run in this process, promoted."""
    job_id = store.jobs.create_job("smcnn", "demo", {
        "store_labels": False, "gold": True, "seed": 1, "train_split": "train", "dev_split": "dev",
        "config": FAST, "promote": True,
    })
    version_id = jobs.run_job(store, job_id)
    return store.models.model_version(version_id)


def test_two_stores_sharing_a_data_folder_keep_their_own_models(store: Store, data_dir: Path, tmp_path: Path) -> None:
    """The issue's case: both stores' first job used to write smcnn-demo-job1.pt, and the second
    replaced the model the first had promoted."""
    other = Store(f"sqlite:///{tmp_path / 'other.sqlite'}")
    try:
        assert store.store_id != other.store_id
        store.datasets.import_dataset(load_demo())
        other.datasets.import_dataset(load_demo())
        first = run_demo_job(store)
        question = load_demo().split("test")[0]
        before = registry.load(Path(first["checkpoint_path"])).score(question.text, question.candidates)
        second = run_demo_job(other)
        assert first["training_data"]["job"] == second["training_data"]["job"] == 1
        assert first["checkpoint_path"] != second["checkpoint_path"]
        assert store.store_id in Path(first["checkpoint_path"]).name
        after = jobs.load_promoted(store, "smcnn", "demo")
        assert after.version["id"] == after.wanted["id"]  # no fallback
        np.testing.assert_allclose(after.ranker.score(question.text, question.candidates), before)

        # Each store's gc keeps the other's registered model.
        for mine, theirs in ((store, second), (other, first)):
            registered = {Path(v["checkpoint_path"]) for v in mine.models.model_versions()}
            age(Path(theirs["checkpoint_path"]), 2 * HOUR)  # past the grace period: only its mark keeps it
            collect_garbage(data_dir / "models", owner=mine.store_id, registered=registered, grace_minutes=1)
            assert Path(theirs["checkpoint_path"]).is_file()
    finally:
        other.close()


# ------------------------------------------------------------------ gc


def run_killed(target: Callable[..., None], *args: Any) -> None:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args)
    # As in test_concurrency: keep the child from re-running a page script AppTest left in __main__.
    with mock.patch.dict(sys.modules, {"__main__": types.ModuleType("__main__")}):
        process.start()
    process.join(120)
    assert process.exitcode == -signal.SIGKILL


def age(path: Path, seconds: float) -> Path:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))
    return path


def gc(env: dict[str, str], *args: str) -> tuple[list[dict], subprocess.CompletedProcess]:
    result = subprocess.run([sys.executable, "-m", "qa_core", "gc", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()], result


def test_gc_cleans_what_killed_trainings_leave_and_nothing_else(database_url: str, data_dir: Path) -> None:
    store = Store(database_url)
    try:
        models = data_dir / "models"
        registered = registry.save(registry.create("overlap"), new_checkpoint_path("overlap", "demo", owner=store.store_id))
        store.models.register_model("overlap", NewVersion("overlap", registered, {"dataset": "demo"}, {}, promote=True))
        legacy_registered = registry.save(registry.create("overlap"), models / "overlap-demo-job1.pt")
        store.models.register_model("overlap", NewVersion("overlap", legacy_registered, {}, {}))
        orphan = new_checkpoint_path("smcnn", "demo", "job2", owner=store.store_id)
        overlap = registry.create("overlap")
        run_killed(killed_before_registering, orphan, overlap.name, overlap.state())
        half = new_checkpoint_path("smcnn", "demo", "job3", owner=store.store_id)
        run_killed(killed_while_writing, half)
        [temporary] = models.glob(f".{half.name}.*.tmp")
        young = registry.save(registry.create("overlap"), new_checkpoint_path("smcnn", "demo", owner=store.store_id))
        theirs = registry.save(registry.create("overlap"), new_checkpoint_path("smcnn", "demo", owner="fedcba987654"))
        unmarked = registry.save(registry.create("overlap"), models / "smcnn-demo-job7.pt")
        for path in (registered, legacy_registered, orphan, temporary, theirs, unmarked):
            age(path, 2 * HOUR)
        env = {**os.environ, "RERANK_LAB_DATA": str(data_dir), "RERANK_LAB_DB": database_url}

        listed, _ = gc(env, "--dry-run")
        assert {record["would_delete"] for record in listed[:-1]} == {str(orphan), str(temporary)}
        assert orphan.exists() and temporary.exists()

        lines, _ = gc(env)
        assert {record["deleted"] for record in lines[:-1]} == {str(orphan), str(temporary)}
        summary = lines[-1]
        assert (summary["deleted"], summary["kept_registered"], summary["kept_recent"]) == (2, 2, 1)
        assert (summary["kept_other_store"], summary["kept_unmarked"]) == (1, 1)
        assert all(p.exists() for p in (registered, legacy_registered, young, theirs, unmarked))
        assert not orphan.exists() and not temporary.exists()

        age(young, 2 * 60)
        lines, _ = gc(env, "--unmarked", "--older-than", "1")
        assert {record["deleted"] for record in lines[:-1]} == {str(unmarked), str(young)}
        assert all(p.exists() for p in (registered, legacy_registered, theirs))
        assert jobs.load_promoted(store, "overlap", "demo").version["checkpoint_path"] == str(registered)
    finally:
        store.close()
