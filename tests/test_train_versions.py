"""The Train page's version card through AppTest (issue 32): a version retrained on bad labels is
compared with the promoted one on DEV (MAP difference, paired randomisation test, the questions that
got worse), promoting it asks for a confirmation, and roll back names the version it goes back to.
A fresh session opens on the model and dataset last used, not on the alphabetically first. A
version's stored numbers name the dataset and labels they are of, there and on the landing page."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from db.base import NewVersion
from db.store import Store
from qa_core.checkpoints import new_checkpoint_path
from qa_core.data.demo import load_demo
from qa_core.services import retraining, store_setup, viz
from qa_core.services.experiments import train_ranker
from qa_core.services.labeling import training_dataset
from qa_core.services.registration import TrainingPlan, train_and_register
from qa_core.types import InputError
from tests.conftest import copy_to_models, model_file
from tests.pages import LANDING, TRAIN, open_page

TINY = {"max_epochs": 1, "filters": 8}


@pytest.fixture(scope="module")
def good_and_bad(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny SM-CNNs: one trained on the demo's gold labels, one on every label flipped (the
    wrong answers marked right), as a retraining on noisy labels could leave it."""
    folder = tmp_path_factory.mktemp("versions")
    demo = load_demo()
    flipped = dataclasses.replace(demo, questions=[
        dataclasses.replace(q, candidates=[dataclasses.replace(c, label=1 - c.label) for c in q.candidates])
        for q in demo.questions
    ])
    paths = folder / "good.pt", folder / "bad.pt"
    for dataset, path in zip((demo, flipped), paths):
        train_ranker("smcnn", dataset, seed=1, model_config=TINY, checkpoint=path, progress=False)
    return paths


def test_a_worse_version_is_compared_on_dev_and_its_promotion_confirmed(store_url, good_and_bad):
    store = Store(store_url)
    store_setup.ensure_demo(store)
    good, bad = good_and_bad
    store.models.register_model("smcnn", NewVersion("smcnn", copy_to_models(good), {"dataset": "demo", "seed": 1}, {"dev_map": 0.8}, promote=True))
    store.models.register_model("smcnn", NewVersion("smcnn", copy_to_models(bad), {"dataset": "demo", "seed": 1}, {"dev_map": 0.3}))

    check = retraining.check_against_promoted(store, "smcnn", 2, "demo")
    assert (check.version, check.promoted, check.questions) == (2, 1, 28)  # the demo's DEV split
    assert check.delta < 0 and check.p_value < 0.05 and check.significantly_worse
    assert len(check.worse) > 0 and (check.worse["Δ AP"] < 0).all()
    assert retraining.check_against_promoted(store, "smcnn", 1, "demo") is None  # the promoted one itself

    app = open_page(TRAIN)  # a fresh session: smcnn, last trained and promoted, not attention_lstm
    assert app.selectbox(key="train_model").value == "smcnn"
    assert app.selectbox(key="train_version_smcnn").value == 1, "the version in use for the demo first"
    assert not [w for w in app.warning if "significantly worse" in w.value]
    app.selectbox(key="train_version_smcnn").select(2).run()
    (warning,) = [w.value for w in app.warning if "significantly worse" in w.value]
    assert "Version 2 against version 1 (promoted for demo) on demo DEV" in warning
    assert f"Δ {check.delta:+.4f}" in warning and "28 questions (clean off)" in warning
    assert "randomisation" in warning
    worse = next(d.value for d in app.dataframe if "Δ AP" in d.value.columns)
    assert worse["qid"].tolist() == check.worse["qid"].tolist()
    promote = app.button(key="train_promote")
    assert promote.disabled, "a significantly worse version is not promoted without a confirmation"
    app.checkbox(key="train_confirm_smcnn_2").check().run()
    app.button(key="train_promote").click().run()
    assert not app.exception, app.exception
    assert store.models.promoted_model("smcnn", "demo")["version"] == 2

    rollback = app.button(key="train_rollback")
    assert rollback.label == "Roll back to version 1"
    rollback.click().run()
    assert store.models.promoted_model("smcnn", "demo")["version"] == 1
    again = app.button(key="train_rollback")  # after 1, 2 and a roll back to 1: nothing earlier than 1
    assert again.label == "Roll back" and again.disabled
    store.close()


def test_the_card_loads_each_checkpoint_as_registered(store_url, good_and_bad):
    """A file copied over a registered checkpoint is refused, not scored and shown as that version;
    a version that does not exist is one sentence, not a StopIteration."""
    store = Store(store_url)
    store_setup.ensure_demo(store)
    good, bad = good_and_bad
    store.models.register_model("smcnn", NewVersion("smcnn", copy_to_models(good), {"dataset": "demo", "seed": 1}, {"dev_map": 0.8}, promote=True))
    second = store.models.register_model("smcnn", NewVersion("smcnn", copy_to_models(bad), {"dataset": "demo", "seed": 1}, {"dev_map": 0.3}))
    shutil.copy(good, store.models.model_version(second)["checkpoint_path"])  # the good model passed off as version 2
    with pytest.raises(InputError, match="not the file registered"):
        retraining.check_against_promoted(store, "smcnn", 2, "demo")
    with pytest.raises(InputError, match="has no version 9"):
        retraining.check_against_promoted(store, "smcnn", 9, "demo")
    store.close()


def test_cards_are_per_store_and_an_unchecked_version_needs_a_confirmation(store_url, good_and_bad, tmp_path, monkeypatch):
    """Two stores served by one process never share a card, even a copy of a store (the same
    version, promoted id and dataset import in each); a version whose checkpoint is refused gets no
    card, the reason, and a confirmation before Promote is enabled."""
    good, bad = good_and_bad
    store = Store(store_url)
    store_setup.ensure_demo(store)
    store.models.register_model("smcnn", NewVersion("smcnn", copy_to_models(good), {"dataset": "demo", "seed": 1}, {"dev_map": 0.8}, promote=True))
    store.models.register_model("smcnn", NewVersion("smcnn", copy_to_models(bad), {"dataset": "demo", "seed": 1}, {"dev_map": 0.3}))
    store.close()
    app = open_page(TRAIN)
    app.selectbox(key="train_version_smcnn").select(2).run()
    assert [w for w in app.warning if "significantly worse" in w.value]

    copy = tmp_path / "copy.sqlite"
    with closing(sqlite3.connect(store_url.removeprefix("sqlite:///"))) as source, closing(sqlite3.connect(copy)) as target:
        source.backup(target)
        # in the copy, version 2's file is another one than the one it registered
        target.execute("UPDATE model_versions SET checkpoint_path = ? WHERE version = 2", (str(copy_to_models(good)),))
        target.commit()
    monkeypatch.setenv("RERANK_LAB_DB", f"sqlite:///{copy}")
    app = open_page(TRAIN)
    app.selectbox(key="train_version_smcnn").select(2).run()
    assert not [w for w in app.warning if "significantly worse" in w.value], "the first store's card"
    (warning,) = [w.value for w in app.warning if "was not compared" in w.value]
    assert "not the file registered" in warning
    promote = app.button(key="train_promote")
    assert promote.disabled and "not the file registered" in promote.help
    app.checkbox(key="train_confirm_smcnn_2").check().run()
    assert not app.button(key="train_promote").disabled


def test_a_version_trained_elsewhere_names_the_dataset_and_labels_of_its_numbers(store_url):
    """The before/after table reads each version's own metrics: version 2, trained on wikiqa, once
    showed wikiqa's DEV numbers beside "in use for demo" as if they were demo's."""
    store = Store(store_url)
    store.models.register_model("smcnn", NewVersion("smcnn", model_file("a.pt"), {"dataset": "demo", "labels": "gold"},
                                                    {"dev_map": 0.8}, promote=True))
    store.models.register_model("smcnn", NewVersion("smcnn", model_file("b.pt"),
                                                    {"dataset": "wikiqa", "labels": {"adjudicated": 0, "labels": 60, "gold": 900}},
                                                    {"dev_map": 0.3}))
    table = retraining.comparison(store, "smcnn", 2, "demo")
    assert table[["version", "in use for", "trained on", "labels", viz.VERSION_DEV_MAP]].values.tolist() == [
        [2, "", "wikiqa", "labels 60, gold 900", 0.3], [1, "demo", "demo", "gold", 0.8]]
    store.close()


def test_the_landing_page_says_its_dev_map_is_on_the_training_labels(store_url, single_thread):
    """A version trained on stored labels that contradict gold on DEV keeps a dev MAP on those
    labels (cnn_wo on the demo: 0.4824, where evaluate, Compare and Errors give 0.2631 on gold): the
    landing page's models table titles it and names the labels, as the Train page's table does."""
    store = Store(store_url)
    store_setup.ensure_demo(store)
    for row in store.datasets.candidate_rows("demo", split="dev")[:60]:  # an annotator disagrees with gold
        store.labels.add_label(row.candidate_id, "alice", 0 if (row.gold_label or 0) > 0 else 1)
    dataset, resolved = training_dataset(store, "demo", gold=True)  # the Train page's default labels
    train_and_register(store, TrainingPlan("smcnn", 1, config=TINY), dataset,
                       checkpoint=new_checkpoint_path("smcnn", "demo", "landing", owner=store.store_id),
                       extra={"labels": resolved.counts()},
                       gold_eval=store.datasets.load_dataset("demo", split="test").questions)
    store.close()

    app = open_page(LANDING)
    models = next(frame.value for frame in app.dataframe if "model" in frame.value.columns)
    assert viz.VERSION_DEV_MAP == "dev MAP (kept best, training labels)" and viz.VERSION_DEV_MAP in models.columns
    assert models["labels"].tolist() == [f"labels 60, gold {resolved.counts()['gold']}"]
    assert retraining.VERSIONS_NOTE in [caption.value for caption in app.caption]
    assert "with the labels that job trained with" in retraining.VERSIONS_NOTE
