"""The Train page through AppTest: a real training job process on the demo corpus, its new version,
promote and roll back, a failing job that leaves the promoted model alone (run by the job's own
process or by a ``python -m qa_core worker``: the page shows the same), the label rule and the
conflicts list."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from db.base import NewVersion
from db.store import Store
from tests import ROOT
from tests.conftest import model_file
from tests.pages import TRAIN, markdown, open_page

pytestmark = pytest.mark.usefixtures("both_modes")  # local mode, and team mode as the admin

JOB_WAIT_S = 240


def start_job(app: AppTest, gold: str = "every split", store_labels: bool = True) -> None:
    app.selectbox(key="train_model").select("smcnn").run()
    app.selectbox(key="train_dataset").select("demo")
    app.checkbox(key="train_store_labels").set_value(store_labels)
    app.radio(key="train_gold").set_value(
        next(choice for choice in app.radio(key="train_gold").options if choice.startswith(gold))
    )
    app.number_input(key="train_max_epochs_smcnn").set_value(1)
    app.button(key="train_start").click().run()
    assert not app.exception, app.exception


def wait_for_outcome(app: AppTest) -> None:
    """Rerun the page (as its polling fragment does) until the job has ended."""
    deadline = time.monotonic() + JOB_WAIT_S
    while time.monotonic() < deadline:
        app.run()
        assert not app.exception, app.exception
        if app.success or app.error:
            return
        time.sleep(0.5)
    raise AssertionError("the training job did not end in time")


def test_retrain_then_promote_and_roll_back(store_url: str) -> None:
    app = open_page(TRAIN)
    assert "No version registered yet" in app.info[0].value
    start_job(app)
    assert app.get("progress"), "a running job shows a progress bar"
    wait_for_outcome(app)
    assert not app.error, [e.value for e in app.error]
    assert "version 1 registered" in app.success[0].value
    # The status line says which number is which: the last evaluation, and the kept best (the table's).
    status = app.get("progress")[0].proto.text
    kept = Store(store_url).models.model_versions("smcnn")[0]["metrics"]["dev_map"]
    assert "last evaluation dev MAP" in status and f"kept the best: version 1, dev MAP {kept:.4f}" in status, status
    store = Store(store_url)
    job = store.jobs.jobs("smcnn")[0]
    assert job["status"] == "succeeded" and store.jobs.job_events(job["id"]), "the live curve reads these events"
    version = store.models.model_versions("smcnn")[0]
    assert version["training_data"]["train_labels"] == 998  # every demo TRAIN pair, from gold
    versions = app.dataframe[1].value  # after the label sources
    assert versions["version"].tolist() == [1] and versions["train labels"].tolist() == [998]
    assert not versions["in use for"].any()
    assert len(app.get("plotly_chart")) == 2, "the job's loss / dev-MAP curve and the versions' MAP-vs-labels curve"

    # A second version (the same checkpoint, registered directly: the page treats it alike).
    copy = Path(version["checkpoint_path"]).with_name("copy.pt")
    shutil.copy(version["checkpoint_path"], copy)
    store.models.register_model("smcnn", NewVersion("smcnn", copy, {"dataset": "demo", "train_labels": 10}, {"dev_map": 0.1}))
    app.run()
    assert app.selectbox(key="train_version_smcnn").value == 2, "a new version is shown first"
    assert app.button(key="train_rollback").disabled, "no version was ever promoted: nothing to roll back to"
    app.selectbox(key="train_version_smcnn").select(1).run()
    app.button(key="train_promote").click().run()
    assert store.models.promoted_model("smcnn", "demo")["version"] == 1 and store.models.promoted_model("smcnn", "demo")["promoted"]
    app.selectbox(key="train_version_smcnn").select(2).run()
    app.button(key="train_promote").click().run()
    assert store.models.promoted_model("smcnn", "demo")["version"] == 2
    assert any("version 2" in caption.value for caption in app.caption)
    comparison = app.dataframe[-1].value
    # the chosen one is the promoted one: one row, naming what its numbers are of
    assert comparison[["version", "in use for", "trained on", "labels"]].values.tolist() == [
        [2, "demo", "demo", "not recorded"]]
    rollback = app.button(key="train_rollback")
    assert not rollback.disabled and rollback.label == "Roll back to version 1"  # short: the dataset is in its help
    assert rollback.help.startswith("Promote version 1 again for demo:")
    rollback.click().run()
    assert not app.exception, app.exception
    assert store.models.promoted_model("smcnn", "demo")["version"] == 1
    after = app.button(key="train_rollback")  # 2 was rolled back: it is not offered as the way back
    assert after.label == "Roll back" and after.disabled


@pytest.mark.parametrize("runner", ["process", "worker"])
def test_failed_job_keeps_the_promoted_model_and_says_why(
    store_url: str, runner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RERANK_LAB_JOB_RUNNER", runner)
    app = open_page(TRAIN)
    store = Store(store_url)
    store.models.register_model("smcnn", NewVersion("smcnn", model_file("v1.pt"), {"dataset": "demo"}, {"dev_map": 0.5}, promote=True))
    start_job(app, gold="none", store_labels=True)  # the demo has no stored labels: nothing to train on
    if runner == "worker":
        assert "queued (waiting for a worker" in app.get("progress")[0].proto.text
        worker = subprocess.run([sys.executable, "-m", "qa_core", "worker", "--until-idle"], cwd=ROOT, capture_output=True,
                                text=True, timeout=JOB_WAIT_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert worker.returncode == 0 and '"status": "failed"' in worker.stdout, worker.stderr
    wait_for_outcome(app)
    (message,) = [e.value for e in app.error]
    # One sentence, and no bar (a full one read as done): the job failed before its first epoch.
    assert message.startswith(f"Training job {store.jobs.jobs('smcnn')[0]['id']} failed before its first step: "
                              "no labels to train on"), message
    assert message.endswith("; nothing was registered, and version 1 stays in use.")
    assert not app.get("progress")
    assert [(v["version"], v["promoted_for"]) for v in store.models.model_versions("smcnn")] == [(1, ["demo"])]


def test_label_rule_and_conflicts_are_shown(store_url: str) -> None:
    app = open_page(TRAIN)
    store = Store(store_url)
    disputed = store.datasets.find_candidate_id("demo", "demo-01", "demo-01-1")
    store.labels.add_label(disputed, "alice", 4)
    store.labels.add_label(disputed, "bob", 0)
    settled = store.datasets.find_candidate_id("demo", "demo-01", "demo-01-2")
    store.labels.add_label(settled, "alice", 3)
    store.labels.add_label(settled, "bob", 0)
    store.labels.adjudicate(settled, 1, "carol")
    app.run()
    text = markdown(app)
    assert "latest adjudication" in text and "majority of its" in text and "Conflicts" in text
    sources = app.dataframe[0].value
    train = sources[sources["split"] == "train"].set_index("source")["pairs"].to_dict()
    assert train == {"adjudicated": 1, "gold": 996, "labels": 1}
    conflicts = app.dataframe[1].value
    assert len(conflicts) == 1 and conflicts.iloc[0]["labels"] == "alice: 4, bob: 0"
    assert conflicts.iloc[0]["used"] == 0  # a tie goes to the grade judged most recently (bob's)


def test_a_failed_jobs_sentence_says_how_far_it_got() -> None:
    """The sentence that replaces the bar of a failed job: the last step reached, the reason, and
    what stays in use (a promoted version, the newest trained on the dataset, or none)."""
    import pandas as pd

    from qa_core.services.retraining import EVENT_COLUMNS, JobStatus

    job = {"id": 7, "status": "failed", "phase": "training", "error": "cancelled", "dataset": "demo"}
    events = pd.DataFrame([(1, None, 2, 5, "epoch", 80, 0.4, 0.61)], columns=EVENT_COLUMNS)
    status = JobStatus(job, events, 1.0)
    assert status.failed and not status.active
    assert status.failure({"version": 3, "promoted": True}) == (
        "Training job 7 failed at epoch 2 of 5: cancelled; nothing was registered, and version 3 stays in use.")
    assert status.failure({"version": 2, "promoted": False}).endswith(
        "and version 2 (the newest trained on demo) stays in use.")
    assert status.failure(None).endswith("and no version is in use for demo.")


def test_the_version_box_opens_on_the_datasets_version() -> None:
    """Issue 45: the newest version of any dataset was opened; now the dataset's own (in use), the
    newest only when a training here just registered it."""
    import pandas as pd

    from qa_core.services.retraining import version_to_open

    versions = pd.DataFrame({"version": [3, 2, 1], "dataset": ["wikiqa", "demo", "demo"]})
    in_use = {"version": 1, "promoted": True}
    assert version_to_open(versions, in_use, "demo", new=False) == 1
    assert version_to_open(versions, in_use, "demo", new=True) == 1  # 3 came from WikiQA: not this dataset's
    assert version_to_open(versions, None, "trecqa", new=False) == 3  # nothing of its own: the newest, card says where
    assert version_to_open(versions.iloc[1:], in_use, "demo", new=True) == 2  # a training here just registered 2
