"""Training jobs in their own process on real databases: success, bad input, SIGKILL at a random
point, cancel; the atomic hand-over; and loading the promoted model with checkpoint fallback."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
import warnings
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from db.base import NewVersion, now
from db.models import LabelRow, TrainingJobRow
from db.store import Store
from qa_core.cli import main
from qa_core.data.demo import load_demo
from qa_core.services import job_runner, jobs, model_loading
from qa_core.services.experiments import train_ranker
from qa_core.training.events import TrainingEvent
from qa_core.types import InputError, NotTrainedError
from tests import ROOT
from tests.conftest import model_file
from tests.waiting import WAIT_S, wait_until

DEMO_PAIRS = sum(len(q.candidates) for q in load_demo().questions)

FAST = {"max_epochs": 1}


@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real SM-CNN checkpoint (one epoch on the demo corpus), trained once for the module."""
    path = tmp_path_factory.mktemp("trained") / "smcnn.pt"
    train_ranker("smcnn", load_demo(), progress=False, checkpoint=path, model_config=FAST)
    return path


@pytest.fixture
def demo_store(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    """The demo corpus in the store; checkpoints and job logs go to this test's folder."""
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    store.datasets.import_dataset(load_demo())
    return store


def promote_v1(store: Store, checkpoint: Path) -> dict:
    """Version 1 of smcnn, promoted, on its own copy of the trained checkpoint (in the data folder)."""
    path = model_file("smcnn-v1.pt")
    shutil.copy(checkpoint, path)
    store.models.register_model("smcnn", NewVersion("smcnn", path, {"dataset": "demo"}, {"dev_map": 0.5}, promote=True))
    return store.models.promoted_model("smcnn", "demo")


def test_job_succeeds_and_registers_an_unpromoted_version(demo_store: Store, trained_checkpoint: Path) -> None:
    current = promote_v1(demo_store, trained_checkpoint)
    candidate = demo_store.datasets.find_candidate_id("demo", "demo-01", "demo-01-1")
    demo_store.labels.add_label(candidate, "alice", 4)
    demo_store.labels.add_label(candidate, "bob", 0)
    demo_store.labels.adjudicate(candidate, 2, "carol")

    job_id = jobs.start_training_job(demo_store, "smcnn", "demo", gold=True, model_config=FAST)
    assert demo_store.jobs.job(job_id)["status"] in {"queued", "running", "succeeded"}
    job = jobs.wait_for_job(demo_store, job_id, WAIT_S)
    assert job["status"] == "succeeded", job["error"]
    assert job["started_at"] <= job["finished_at"] and job["phase"] == "done"

    version = demo_store.models.model_version(job["model_version_id"])
    assert (version["name"], version["version"], version["promoted_for"]) == ("smcnn", 2, [])
    assert 0.0 <= version["metrics"]["dev_map"] <= 1.0 and "test_gold_map" in version["metrics"]
    assert version["training_data"]["labels"] == {"adjudicated": 1, "labels": 0, "preferences": 0, "gold": DEMO_PAIRS - 1}
    assert version["training_data"]["job"] == job_id
    assert Path(version["checkpoint_path"]).is_file()
    assert demo_store.models.promoted_model("smcnn", "demo")["id"] == current["id"]  # registered, not promoted
    # Credited to who queued it (local mode: the page's actor), not to the job process's OS user (issue 45).
    registered = demo_store.users.audit_events(["register"])[0]
    assert (registered["actor"], registered["detail"]["job"]) == ("local", job_id)
    assert registered["detail"]["run_by"].startswith("cli:")

    events = demo_store.jobs.job_events(job_id)
    last = events[-1].event
    assert (last.step, last.total, last.unit) == (1, 1, "epoch") and 0.0 <= last.dev_map <= 1.0
    assert demo_store.jobs.job_events(job_id, after_id=events[-1].id) == []
    assert [j["id"] for j in demo_store.jobs.jobs("smcnn")] == [job_id]

    demo_store.models.promote("smcnn", 2, "demo")
    assert model_loading.load_ranker(demo_store, "smcnn", "demo").score("who painted it?", ["Leonardo"]).shape == (1,)


def test_job_with_bad_input_fails_with_a_clear_error(demo_store: Store, trained_checkpoint: Path) -> None:
    current = promote_v1(demo_store, trained_checkpoint)
    # Stored labels only, and nobody has labelled anything yet.
    job_id = jobs.start_training_job(demo_store, "smcnn", "demo", store_labels=True, gold=False, model_config=FAST)
    job = jobs.wait_for_job(demo_store, job_id, WAIT_S)
    assert job["status"] == "failed"
    assert "no labels to train on in split 'train'" in job["error"]
    assert [v["id"] for v in demo_store.models.model_versions("smcnn")] == [current["id"]]

    for kwargs, message in [
        ({"model": "overlap", "dataset": "demo"}, "nothing to train"),
        ({"model": "nosuch", "dataset": "demo"}, "unknown model"),
        ({"model": "smcnn", "dataset": "nosuch"}, "unknown dataset"),
        ({"model": "smcnn", "dataset": "demo", "store_labels": False}, "choose the labels"),
    ]:
        with pytest.raises(InputError, match=message):
            jobs.start_training_job(demo_store, **kwargs)
    assert len(demo_store.jobs.jobs()) == 1


def test_progress_fraction_for_the_progress_bar() -> None:
    job = {"status": "running", "model": "smcnn", "params": {"config": {"max_epochs": 4}}}
    assert jobs.progress_fraction(job, []) == 0.0
    assert jobs.progress_fraction(job, [TrainingEvent(1, 4), TrainingEvent(3, 4)]) == 0.75
    grid = [TrainingEvent(6, 24, "grid point", dev_map=0.5, detail={"C": 1.0})]  # the tree kernel's steps
    assert jobs.progress_fraction(job, grid) == pytest.approx(6 / 24)
    assert jobs.progress_fraction(job, [TrainingEvent(2)]) == 0.0  # nothing planned: no false progress
    assert jobs.progress_fraction({**job, "status": "failed"}, []) == 1.0


def test_unknown_model_setting_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no_such_setting"):
        train_ranker("smcnn", load_demo(), model_config={"no_such_setting": 1})


def test_job_killed_at_a_random_point_leaves_model_and_store_intact(demo_store: Store, trained_checkpoint: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    current = promote_v1(demo_store, trained_checkpoint)
    checkpoint_bytes = Path(current["checkpoint_path"]).read_bytes()
    candidate = demo_store.datasets.find_candidate_id("demo", "demo-02", "demo-02-0")
    demo_store.labels.add_label(candidate, "alice", 3)
    history = demo_store.labels.label_history(candidate)

    # Long enough (up to 90 dev checks) that the kill lands before the end.
    slow = {"max_epochs": 30, "patience": 30, "eval_every": 1}
    job_id = jobs.start_training_job(demo_store, "smcnn", "demo", gold=True, model_config=slow)
    kill_after_events = rng.randint(0, 12)  # 0: somewhere while it loads data and models
    wait_until(lambda: demo_store.jobs.job(job_id)["status"] == "running", "the job to start")
    if kill_after_events == 0:
        time.sleep(rng.uniform(0.0, 2.0))
    else:
        wait_until(lambda: len(demo_store.jobs.job_events(job_id)) >= kill_after_events, "progress events")
        time.sleep(rng.uniform(0.0, 0.05))
    job = demo_store.jobs.job(job_id)
    assert job["status"] == "running", f"seed {seed}: the job ended before the kill: {job}"
    os.kill(job["pid"], signal.SIGKILL)

    failed = wait_until(lambda: (j := demo_store.jobs.job(job_id))["status"] == "failed" and j, "the job to be marked failed")
    assert "ended without reporting" in failed["error"], f"seed {seed}"
    assert [v["id"] for v in demo_store.models.model_versions("smcnn")] == [current["id"]], f"seed {seed}"
    assert Path(current["checkpoint_path"]).read_bytes() == checkpoint_bytes
    assert demo_store.labels.label_history(candidate) == history
    with demo_store.session_scope() as session:
        assert session.scalar(select(func.count()).select_from(LabelRow)) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback: the promoted checkpoint loads
        assert model_loading.load_ranker(demo_store, "smcnn", "demo") is not None
    assert len(demo_store.jobs.job_events(job_id)) >= kill_after_events


def test_cancel_stops_the_process_and_fails_the_job(demo_store: Store) -> None:
    job_id = jobs.start_training_job(demo_store, "smcnn", "demo", gold=True, model_config=FAST)
    assert jobs.cancel_job(demo_store, job_id) is True
    job = jobs.wait_for_job(demo_store, job_id, WAIT_S)
    assert (job["status"], job["error"]) == ("failed", "cancelled")
    assert jobs.cancel_job(demo_store, job_id) is False
    assert demo_store.models.model_versions("smcnn") == []


def test_finish_is_one_transaction_that_a_dead_verdict_blocks(store: Store) -> None:
    """A job declared dead (here: marked failed) cannot register its model afterwards, and the
    rolled-back registration leaves the promoted flag where it was."""
    store.models.register_model("smcnn", NewVersion("smcnn", model_file("1.pt"), {"dataset": "demo"}, {}, promote=True))
    job_id = store.jobs.create_job("smcnn", "demo", {"promote": True})
    store.jobs.start_job(job_id)
    store.jobs.add_job_event(job_id, TrainingEvent(1, 2, batch=3, loss=float("nan"), dev_map=0.5))
    assert store.jobs.job_events(job_id)[0].event.loss is None
    assert store.jobs.fail_job(job_id, "declared dead") is True
    with pytest.raises(InputError, match="no longer running"):
        store.jobs.finish_job(job_id, NewVersion("smcnn", model_file("2.pt"), {}, {}, promote=True))
    assert [(v["version"], v["promoted_for"]) for v in store.models.model_versions("smcnn")] == [(1, ["demo"])]
    assert store.jobs.job(job_id)["status"] == "failed"
    with pytest.raises(InputError, match="only a queued job"):
        store.jobs.start_job(job_id)


def test_reader_marks_a_silent_job_failed(store: Store) -> None:
    # A job on another host: no pid check possible, only the heartbeat.
    job_id = store.jobs.create_job("smcnn", "demo", {})
    store.jobs.start_job(job_id, pid=1, host="another-host")
    assert store.jobs.job(job_id)["status"] == "running"
    with store.session_scope() as session:
        stale = now() - timedelta(hours=1)
        session.execute(update(TrainingJobRow).where(TrainingJobRow.id == job_id).values(heartbeat_at=stale))
    job = store.jobs.job(job_id)
    assert job["status"] == "failed" and "no heartbeat" in job["error"]
    # On this host: a pid that no longer runs.
    other = store.jobs.create_job("smcnn", "demo", {})
    store.jobs.start_job(other, pid=_dead_pid())
    assert store.jobs.jobs()[0]["status"] == "failed"
    with pytest.raises(InputError):
        store.jobs.job(other + 100)


def test_job_runner_runs_only_queued_jobs(store: Store, database_url: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RERANK_LAB_DB", database_url)
    job_id = store.jobs.create_job("smcnn", "demo", {})
    store.jobs.fail_job(job_id, "cancelled")
    assert job_runner.main([str(job_id)]) == 2
    assert f"error: training job {job_id} is failed; only a queued job can start" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the CLI's train has no job mode: the job runner is its own entry point
        main(["--db", database_url, "train", "--model", "smcnn", "--data", "demo", "--job", str(job_id)])
    assert "unrecognized arguments: --job" in capsys.readouterr().err
    monkeypatch.setenv("RERANK_LAB_DB", "postgresql+psycopg://bob:s3cr3t@127.0.0.1:1/db")  # nothing listens on port 1
    assert job_runner.main([str(job_id)]) == 2  # a store it cannot open: one sentence in the job's log, no traceback
    assert "error: cannot open the store at postgresql+psycopg://bob:***@127.0.0.1:1/db" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--db", database_url, "train", "--model", "smcnn"])
    assert "required: --data" in capsys.readouterr().err


# ------------------------------------------------------------------------------ checkpoint fallback


def test_loading_a_model_asks_the_store_for_its_version_once(
    store: Store, trained_checkpoint: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's model load reads the version in use once (it was read twice: a check, then the load)."""
    asked = []
    promoted_model = store.models.promoted_model
    monkeypatch.setattr(store.models, "promoted_model", lambda *args: asked.append(args) or promoted_model(*args))
    with pytest.raises(NotTrainedError, match="train it with: python -m qa_core train --model smcnn --data demo"):
        model_loading.load_ranker(store, "smcnn", "demo")
    assert asked == [("smcnn", "demo")]
    shutil.copy(trained_checkpoint, models_dir / "v1.pt")
    store.models.register_model("smcnn", NewVersion("smcnn", models_dir / "v1.pt", {"dataset": "demo"}, {}))
    asked.clear()
    model_loading.load_ranker(store, "smcnn", "demo")
    assert asked == [("smcnn", "demo")]
    asked.clear()  # a page reads the version to key its cache, then loads that very record
    monkeypatch.setattr(store.models, "promotion_history", lambda *args: asked.append(("history", *args)) or [])
    version = model_loading.current_version(store, "smcnn", "demo")
    model_loading.load_ranker(store, "smcnn", "demo", version=version)
    assert asked == [("smcnn", "demo")] and version.key == f"{version.record['id']}:{version.record['checkpoint_path']}"
    # the fallbacks are read only when the version in use fails to load


def test_corrupt_or_missing_checkpoint_falls_back_to_the_previous_version(
    store: Store, trained_checkpoint: Path, models_dir: Path
) -> None:
    with pytest.raises(NotTrainedError):
        jobs.load_promoted(store, "smcnn", "demo")
    paths = {v: models_dir / f"v{v}.pt" for v in (1, 2, 3, 4)}
    for version, path in paths.items():
        shutil.copy(trained_checkpoint, path)
        store.models.register_model("smcnn", NewVersion("smcnn", path, {"dataset": "other" if version == 4 else "demo"}, {}))
    store.models.promote("smcnn", 1, "demo")
    store.models.promote("smcnn", 2, "demo")  # version 3 is newer but was never promoted; 4 is another dataset's

    assert jobs.load_promoted(store, "smcnn", "demo").notice is None
    paths[2].write_bytes(b"not a checkpoint")
    loaded = jobs.load_promoted(store, "smcnn", "demo")
    assert (loaded.version["version"], loaded.wanted["version"]) == (1, 2)
    assert "version 2" in loaded.notice and "corrupt" in loaded.notice and "version 1 is used" in loaded.notice
    with pytest.warns(jobs.CheckpointFallbackWarning, match="version 1 is used"):
        ranker = model_loading.load_ranker(store, "smcnn", "demo")
    assert ranker.score("who painted the mona lisa?", ["Leonardo painted it."]).shape == (1,)

    paths[2].unlink()
    paths[1].unlink()
    loaded = jobs.load_promoted(store, "smcnn", "demo")
    assert loaded.version["version"] == 3 and "not found" in loaded.notice  # the newest trained on demo
    paths[3].unlink()
    with pytest.raises(InputError, match="no version of model 'smcnn' could be loaded"):
        model_loading.load_ranker(store, "smcnn", "demo")  # never the version trained on another dataset
    assert store.models.promoted_model("smcnn", "demo")["version"] == 2  # loading never changes the registry


def _dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_rank_says_a_checkpoint_fallback_once_in_one_sentence(
    store: Store, trained_checkpoint: Path, models_dir: Path
) -> None:
    """Issue 45: ``rank`` printed the notice twice, the second time as Python's warning display
    (file, line and the source line of ``warnings.warn``)."""
    store.datasets.import_dataset(load_demo())
    paths = {version: models_dir / f"v{version}.pt" for version in (1, 2)}
    for path in paths.values():
        shutil.copy(trained_checkpoint, path)
        store.models.register_model("smcnn", NewVersion("smcnn", path, {"dataset": "demo"}, {}, promote=True))
    paths[2].write_bytes(b"not a checkpoint")
    result = subprocess.run(
        [sys.executable, "-m", "qa_core", "--db", store.url, "rank", "who painted the mona lisa?", "--model", "smcnn",
         "--top", "1"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1
    notes = result.stderr.splitlines()
    assert len(notes) == 1, result.stderr
    assert notes[0].startswith("warning: model 'smcnn' version 2: checkpoint ") and notes[0].endswith(
        "; it could not be loaded, so version 1 is used instead")
