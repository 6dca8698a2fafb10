"""The pages remember what a person was looking at, in one session, across pages (AppTest's
``switch_page``, which drops a left page's widget values as a browser's page change does): the
typed-or-picked question on Ask and Compare, the picked question per dataset (by qid across a
re-import), and each dataset's model and Compare's models, starting on the model last chosen on another
page: only a model chosen by hand or by a link counts, never the default a page opened on. Local mode
only: nothing here depends on roles."""

from __future__ import annotations

import dataclasses

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.services import store_setup
from tests.pages import LANDING, open_page

ASK, COMPARE, ERRORS, LABEL = "pages/1_Ask.py", "pages/2_Compare.py", "pages/5_Errors.py", "pages/3_Label.py"
OTHER = "other"  # a copy of the demo: the same qids, so only the dataset tells its questions apart
TYPED, PICKED = "Type a question", "Pick a dataset question"


@pytest.fixture
def app(store_url: str):
    """The landing page of a session whose store holds the demo and its copy ``OTHER``."""
    store = Store(store_url)
    store_setup.ensure_demo(store)
    store.datasets.import_dataset(dataclasses.replace(load_demo(), name=OTHER))
    store.close()
    return open_page(LANDING)


def go(app, page: str):
    app.switch_page(page).run()
    assert not app.exception, app.exception
    return app


def test_the_question_comes_back_on_ask_and_moves_to_compare(app, store_url: str):
    go(app, ASK)
    app.text_input(key="question").input("who painted the sistine chapel").run()
    app.number_input(key="k").set_value(7).run()
    app.radio(key="source").set_value(PICKED).run()
    app.selectbox(key="picked").select_index(3).run()
    app.selectbox(key="dataset").select(OTHER).run()
    assert app.selectbox(key="picked").value == 0  # the demo's pick is not the other dataset's
    app.selectbox(key="picked").select_index(5).run()
    app.selectbox(key="dataset").select("demo").run()
    assert app.selectbox(key="picked").value == 3  # each dataset its own

    go(go(app, ERRORS), ASK)  # away by the sidebar and back
    assert app.radio(key="source").value == PICKED
    assert (app.selectbox(key="dataset").value, app.selectbox(key="picked").value) == ("demo", 3)
    app.radio(key="source").set_value(TYPED).run()
    assert (app.text_input(key="question").value, app.number_input(key="k").value) == ("who painted the sistine chapel", 7)

    go(app, COMPARE)  # the same question box, on the same choice
    assert app.radio(key="source").value == TYPED
    assert (app.text_input(key="question").value, app.number_input(key="k").value) == ("who painted the sistine chapel", 7)
    app.radio(key="source").set_value(PICKED).run()
    assert app.selectbox(key="picked").value == 3
    app.selectbox(key="dataset").select(OTHER).run()
    assert app.selectbox(key="picked").value == 5

    # A re-import that reorders the questions: the box keeps the question, not its place in the list.
    picked = shown(app.selectbox(key="picked"))
    store = Store(store_url)
    other = dataclasses.replace(load_demo(), name=OTHER)
    store.datasets.import_dataset(dataclasses.replace(other, questions=other.questions[::-1]), replace=True)
    store.close()
    app.run()
    assert not app.exception, app.exception
    assert shown(app.selectbox(key="picked")) == picked
    assert app.selectbox(key="picked").value == len(other.questions) - 1 - 5


def shown(box) -> str:
    """The option a select box shows."""
    return box.options[box.index]


def test_compare_starts_on_the_model_last_used_elsewhere(app):
    models = lambda: app.multiselect(key="models").value  # noqa: E731
    go(app, COMPARE)
    assert models() == ["bm25", "overlap"]  # a fresh session: the usual defaults
    app.multiselect(key="models").set_value(["overlap", "bm25"]).run()
    go(go(go(app, ERRORS), ASK), COMPARE)  # their model boxes opened on a default: no model chosen
    assert models() == ["overlap", "bm25"]  # its own choice

    go(app, ASK).selectbox(key="model").select("smcnn").run()
    assert go(app, COMPARE) and models() == ["smcnn", "bm25", "overlap"]  # first, then the defaults
    go(app, ERRORS).selectbox(key="model").select("overlap").run()
    assert go(app, COMPARE) and models() == ["overlap", "bm25"]  # not repeated
    app.multiselect(key="models").set_value(["bm25", "smcnn"]).run()
    go(app, ERRORS).selectbox(key="model").select("bm25").run()
    app.selectbox(key="model").select("overlap").run()  # the same model as before, chosen again
    assert go(app, COMPARE) and models() == ["overlap", "bm25"]


def test_each_dataset_keeps_its_own_models(app):
    go(app, ASK).selectbox(key="model").select("overlap").run()
    app.selectbox(key="dataset").select(OTHER).run()
    assert app.selectbox(key="model").value == "bm25"  # the demo's choice stays with the demo
    app.selectbox(key="dataset").select("demo").run()
    assert app.selectbox(key="model").value == "overlap"  # and comes back with it

    models = lambda: app.multiselect(key="models").value  # noqa: E731
    assert go(app, COMPARE) and models() == ["overlap", "bm25"]
    app.multiselect(key="models").set_value(["bm25", "smcnn"]).run()
    app.selectbox(key="dataset").select(OTHER).run()
    assert models() == ["bm25", "overlap"]  # nothing chosen for the other dataset
    app.multiselect(key="models").set_value(["overlap", "bm25"]).run()
    go(go(app, ERRORS), COMPARE)  # Errors opened on the other dataset: no model chosen
    assert app.selectbox(key="dataset").value == OTHER and models() == ["overlap", "bm25"]
    app.selectbox(key="dataset").select("demo").run()
    assert models() == ["bm25", "smcnn"]  # the demo's own choice, kept meanwhile


def test_a_model_chosen_by_a_link_goes_first_on_compare(app):
    app.query_params.update(dataset=OTHER, model="overlap")  # Errors' link to Ask
    assert go(app, ASK).selectbox(key="model").value == "overlap"
    app.query_params.clear()
    go(app, COMPARE)
    assert app.selectbox(key="dataset").value == OTHER
    assert app.multiselect(key="models").value == ["overlap", "bm25"]
