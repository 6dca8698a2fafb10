"""Issue 22 through the pages: two datasets and one model name. Each dataset's pages (Ask, Errors,
Train) use the version promoted for it and say which; promoting the other dataset's version changes
nothing here; roll back stays within the dataset it is asked for."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from db.base import NewVersion
from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.services import store_setup
from qa_core.services.experiments import train_ranker
from tests.conftest import copy_to_models
from tests.pages import ASK, COMPARE, LANDING, TRAIN, open_page

pytestmark = pytest.mark.usefixtures("both_modes")  # local mode, and team mode as the admin

ERRORS = "pages/5_Errors.py"
OTHER = "other"


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny SM-CNNs (one epoch, 8 filters) that score differently (seeds 1 and 2)."""
    folder = tmp_path_factory.mktemp("smcnn")
    paths = folder / "one.pt", folder / "two.pt"
    for seed, path in enumerate(paths, start=1):
        train_ranker("smcnn", load_demo(), seed=seed, model_config={"max_epochs": 1, "filters": 8}, checkpoint=path,
                     progress=False)
    return paths


@pytest.fixture
def store(store_url: str, two_checkpoints) -> Store:
    """The demo and a copy named "other"; smcnn version 1 trained on the demo, version 2 on "other",
    each promoted for its own dataset, as two trainings would leave them."""
    store = Store(store_url)
    store_setup.ensure_demo(store)
    store.datasets.import_dataset(dataclasses.replace(load_demo(), name=OTHER))
    for dataset, path in zip(("demo", OTHER), two_checkpoints):
        store.models.register_model("smcnn", NewVersion("smcnn", copy_to_models(path), {"dataset": dataset, "seed": 1}, {}, promote=True))
    yield store
    store.close()


def captions(app) -> str:
    return "\n".join(caption.value for caption in app.caption)


def ask_top_score(dataset: str) -> tuple[str, float]:
    app = open_page(ASK, dataset=dataset, qid="demo-33", model="smcnn")
    return captions(app), float(app.dataframe[0].value["score"].iloc[0])


def errors_page(dataset: str):
    app = open_page(LANDING)
    app.switch_page(ERRORS).run()
    app.selectbox(key="dataset").select(dataset).run()
    app.selectbox(key="model").select("smcnn").run()
    assert not app.exception, app.exception
    return app


def test_each_dataset_uses_its_own_version_on_every_page(store):
    demo_caption, demo_score = ask_top_score("demo")
    other_caption, other_score = ask_top_score(OTHER)
    assert "smcnn version 1 · trained on demo, seed 1 · promoted for demo" in demo_caption
    assert f"smcnn version 2 · trained on {OTHER}, seed 1 · promoted for {OTHER}" in other_caption
    assert demo_score != other_score  # two different models scored the same question

    demo_errors = errors_page("demo")
    assert "smcnn version 1" in captions(demo_errors)
    demo_map = float(demo_errors.dataframe[0].value["AP"].mean())
    assert "smcnn version 2" in captions(errors_page(OTHER))

    store.models.promote("smcnn", 1, OTHER)  # the demo's version, promoted explicitly for the other dataset
    assert "smcnn version 1 · trained on demo, seed 1 · promoted for other" in ask_top_score(OTHER)[0]
    again = errors_page("demo")
    assert float(again.dataframe[0].value["AP"].mean()) == demo_map and "smcnn version 1" in captions(again)


def test_roll_back_on_the_train_page_stays_within_its_dataset(store):
    store.models.promote("smcnn", 1, OTHER)
    app = open_page(TRAIN)
    app.selectbox(key="train_dataset").select(OTHER).run()
    app.selectbox(key="train_model").select("smcnn").run()
    assert not app.exception, app.exception
    rollback = app.button(key="train_rollback")
    assert rollback.label == "Roll back to version 2" and f"again for {OTHER}:" in rollback.help
    rollback.click().run()
    assert not app.exception, app.exception
    assert store.models.promoted_model("smcnn", OTHER)["version"] == 2
    assert store.models.promoted_model("smcnn", "demo")["version"] == 1  # the demo's promotion is untouched
    assert store.models.rollback_target("smcnn", "demo") is None


def test_pages_start_on_the_trained_model_and_follow_a_dataset_change(store):
    errors = open_page(LANDING)
    errors.switch_page(ERRORS).run()
    errors.selectbox(key="dataset").select("demo").run()
    assert errors.selectbox(key="model").value == "smcnn"  # last promoted for the demo, not the first name
    errors.selectbox(key="model").select("bm25").run()
    errors.selectbox(key="dataset").select(OTHER).run()
    assert not errors.exception, errors.exception
    assert errors.selectbox(key="model").value == "smcnn"  # the other dataset's own, not the demo's choice
    assert "smcnn version 2" in captions(errors)

    compare = open_page(COMPARE)
    assert compare.multiselect(key="models").value[0] == "smcnn"  # trained models first, then a baseline
    compare.selectbox(key="dataset").select("demo").run()
    compare.multiselect(key="models").set_value(["overlap", "bm25"]).run()
    compare.selectbox(key="dataset").select(OTHER).run()
    assert not compare.exception, compare.exception
    assert compare.multiselect(key="models").value[0] == "smcnn"  # the other dataset's default, not the demo's choice


def test_train_opens_on_the_datasets_own_version_and_names_another_datasets(store):
    """Issue 45: on the demo, Train opened on the newest version (trained on "other") and compared it
    with the demo's as if it were the demo's own, "significantly worse". It opens on the version the
    chosen dataset uses, and a version of another dataset chosen there says where it was trained."""
    app = open_page(TRAIN)
    app.selectbox(key="train_dataset").select("demo").run()
    app.selectbox(key="train_model").select("smcnn").run()
    assert not app.exception, app.exception
    assert app.selectbox(key="train_version_smcnn").value == 1  # promoted for the demo, not the newest (2)
    assert not [w for w in [*app.warning, *app.info] if "against version" in w.value], "no card: it is the one in use"
    app.selectbox(key="train_version_smcnn").select(2).run()
    (card,) = [w.value for w in [*app.warning, *app.info] if "against version" in w.value]
    assert card.startswith(f"Version 2 (trained on {OTHER}) against version 1 (promoted for demo) on demo DEV"), card
    app.selectbox(key="train_dataset").select(OTHER).run()
    assert app.selectbox(key="train_version_smcnn").value == 2  # the other dataset's own
    app.selectbox(key="train_dataset").select("demo").run()
    assert app.selectbox(key="train_version_smcnn").value == 1  # back on the demo: its own again
