"""One evaluation rule (issue 22): Compare, Errors and the CLI report the same numbers for the same
model, split and label rule; gold is the default, so a label made on a TEST pair changes no reported
TEST metric unless the training-label rule is chosen, and every place says which rule it used."""

from __future__ import annotations

import dataclasses
import json

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.services import store_setup
from qa_core.services.evaluation_labels import LabelRule
from tests.cli import run_cli
from tests.pages import COMPARE, LANDING, open_page

ERRORS = "pages/5_Errors.py"


def flip_a_test_answer(url: str) -> str:
    """Label the first TEST question's gold answer wrong (as an annotator could); returns its qid."""
    question = next(q for q in load_demo().split("test") if any(c.label for c in q.candidates))
    answer = next(c for c in question.candidates if c.label)
    store = Store(url)
    store_setup.ensure_demo(store)
    store.labels.add_label(store.datasets.find_candidate_id("demo", question.qid, answer.doc_id), "ann", 0)
    store.close()
    return question.qid


def errors_map(rule: LabelRule, clean: bool | None = False, dataset: str = "demo") -> float:
    """Errors' mean AP (``clean`` None: the page's default question set, untouched)."""
    app = open_page(LANDING)
    app.switch_page(ERRORS).run()
    app.selectbox(key="dataset").select(dataset).run()
    app.selectbox(key="model").select("overlap").run()
    if clean is not None:
        app.toggle(key="clean").set_value(clean).run()
    app.radio(key="labels").set_value(rule).run()
    assert not app.exception, app.exception
    return float(app.dataframe[0].value["AP"].mean())


def compare_map(rule: LabelRule, clean: bool | None = None, dataset: str = "demo") -> float:
    app = open_page(COMPARE)
    app.selectbox(key="dataset").select(dataset).run()
    app.multiselect(key="models").set_value(["overlap", "bm25"]).run()
    app.radio(key="view").set_value("Whole split").run()
    if clean is not None:
        app.toggle(key="clean").set_value(clean).run()
    app.radio(key="labels").set_value(rule).run()
    app.button(key="compare_split").click().run()
    assert not app.exception, app.exception
    assert any(f"Labels: {rule.value}" in caption.value for caption in app.caption)
    means = app.dataframe[0].value
    return float(means.loc["overlap", "map"])


def cli_map(capsys, rule: LabelRule) -> float:
    code, out, err = run_cli("evaluate", "--model", "overlap", "--data", "demo", "--split", "test",
                             "--labels", rule.value, "--quiet", capsys=capsys)
    assert code == 0, err
    assert "scoring" not in err, "--quiet prints no progress"
    line = json.loads(out.strip().splitlines()[-1])
    assert line["labels"] == rule.value
    return line["map"]


@pytest.fixture
def flipped(store_url, monkeypatch) -> str:
    return flip_a_test_answer(store_url)


def test_compare_errors_and_the_cli_agree_under_each_rule(flipped, capsys, tmp_path):
    gold = {"errors": errors_map(LabelRule.GOLD), "compare": compare_map(LabelRule.GOLD),
            "cli": cli_map(capsys, LabelRule.GOLD)}
    training = {"errors": errors_map(LabelRule.TRAINING), "compare": compare_map(LabelRule.TRAINING),
                "cli": cli_map(capsys, LabelRule.TRAINING)}
    assert max(gold.values()) - min(gold.values()) < 1e-9, gold
    assert max(training.values()) - min(training.values()) < 1e-9, training
    assert training["cli"] != gold["cli"], "the TEST label counts only under the training-label rule"


def test_compare_and_errors_give_the_same_map_by_default_and_when_clean(store_url):
    """On a dataset where clean matters (5 TEST questions without a correct answer)."""
    demo = load_demo()
    unanswered = {q.qid for q in demo.split("test")[:5]}
    mixed = dataclasses.replace(demo, name="mixed", questions=[
        dataclasses.replace(q, candidates=[dataclasses.replace(c, label=0) for c in q.candidates])
        if q.qid in unanswered else q for q in demo.questions])
    store = Store(store_url)
    store_setup.ensure_demo(store)
    store.datasets.import_dataset(mixed)
    store.close()
    default = errors_map(LabelRule.GOLD, clean=None, dataset="mixed")
    assert default == pytest.approx(compare_map(LabelRule.GOLD, dataset="mixed"), abs=1e-12)
    clean = errors_map(LabelRule.GOLD, clean=True, dataset="mixed")
    assert clean == pytest.approx(compare_map(LabelRule.GOLD, clean=True, dataset="mixed"), abs=1e-12)
    assert clean != pytest.approx(default)  # the two question sets differ here


def test_the_cli_compare_names_its_rule(flipped, capsys):
    code, out, err = run_cli("compare", "overlap", "bm25", "--data", "demo", "--metric", "map", "--quiet",
                             capsys=capsys)
    assert code == 0, err
    assert ("Labels: gold, the dataset's gold labels as imported (labels made in the app do not change them)."
            in out.splitlines())
    code, out, err = run_cli("compare", "overlap", "bm25", "--data", "demo", "--metric", "map", "--format", "json",
                             "--labels", "training", "--quiet", capsys=capsys)
    assert code == 0 and json.loads(out)["labels"] == "training"


def test_a_progress_bar_shows_unless_quiet(flipped, capsys):
    code, _, err = run_cli("evaluate", "--model", "overlap", "--data", "demo", "--split", "test", capsys=capsys)
    assert code == 0 and "scoring test" in err and "question" in err
