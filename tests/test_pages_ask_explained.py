"""Ask under AppTest, what it offers to explain (issue 45): a stored run declares no explanation part,
so no explainer picker and no A/B pickers are drawn beside the sentence saying a run cannot be
explained; a candidate's text is shown once (the heatmap's words, or the plain text where no
heatmap draws it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.store import Store
from pages.render.markdown import as_markdown
from qa_core.data.demo import load_demo
from qa_core.data.exporters import write_trec_run
from qa_core.rankers.external import NO_WORD_EXPLANATION
from qa_core.services import store_setup, systems
from tests.pages import ASK, open_page

SISTINE = "demo-33"  # "Who painted the ceiling of the Sistine Chapel?", a test question
ANSWER = "Michelangelo painted the ceiling between 1508 and 1512."  # its right answer


@pytest.fixture
def run_system(store_url: str, tmp_path: Path) -> str:
    """A stored run of the demo that ranks each question's right answers first."""
    store = Store(store_url)
    store_setup.ensure_demo(store)
    run = {q.qid: {c.doc_id: float(c.label or 0) - i / 1000 for i, c in enumerate(q.candidates)}
           for q in load_demo().questions}
    write_trec_run(run, tmp_path / "gold.run", tag="gold")
    systems.add_run(store, tmp_path / "gold.run", "demo", "goldrun")
    store.close()
    return systems.listed_name("goldrun")


def texts(app) -> list[str]:
    return [element.value for element in app.markdown]


def test_a_run_offers_no_explainer_and_says_why_once_per_view(run_system):
    app = open_page(ASK, dataset="demo", qid=SISTINE, model=run_system, view="contrast")
    assert app.selectbox(key="r1-open").value == 1
    pickers = [box.label for box in app.selectbox]
    assert "Explainer" not in pickers and "A (ranked higher)" not in pickers
    refusals = [info.value for info in app.info]
    assert len(refusals) == 2 and all(NO_WORD_EXPLANATION in refusal for refusal in refusals)  # Why, and A above B
    assert texts(app).count(ANSWER) == 1  # no heatmap draws it: its text, once


def test_an_explained_candidates_text_is_its_heatmap(store_url):
    app = open_page(ASK, dataset="demo", qid=SISTINE, model="overlap")
    assert "Explainer" in [box.label for box in app.selectbox]
    candidates = next(q for q in load_demo().questions if q.qid == SISTINE).candidates
    assert not {as_markdown(c.text) for c in candidates} & set(texts(app))  # not printed as a paragraph too
    [heatmap] = [h.proto.body for h in app.get("html") if 'margin-bottom:4px">Answer, ' in h.proto.body]
    first = app.dataframe[0].value["text"].iloc[0]  # the opened candidate, #1
    assert f">{first.split()[0]}</span>" in heatmap and as_markdown(first) not in texts(app)
