"""The Streamlit pages through AppTest: real store (SQLite in tmp), real demo corpus, real spaCy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from db.store import Store
from qa_core.types import Candidate, Dataset, Question

ROOT = Path(__file__).resolve().parent.parent
LANDING, ASK = str(ROOT / "app.py"), str(ROOT / "pages" / "1_Ask.py")
TIMEOUT = 60  # the first run loads spaCy and builds the BM25 index
DEMO_QUESTION, DEMO_ANSWER = "who discovered penicillin", "Alexander Fleming"
SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh data folder and SQLite store for the app, through the environment as in production."""
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("RERANK_LAB_DB", url)
    return url


def ask_page() -> AppTest:
    app = AppTest.from_file(ASK, default_timeout=TIMEOUT).run()
    assert not app.exception, app.exception
    return app


def all_markdown(app: AppTest) -> str:
    return "\n".join(element.value for element in app.markdown)


def test_landing_page_imports_demo_and_lists_it(store_url):
    app = AppTest.from_file(LANDING, default_timeout=TIMEOUT).run()
    assert not app.exception, app.exception
    assert app.title[0].value == "Rerank Lab"
    assert any("Running on: " in caption.value for caption in app.caption)
    assert "demo" in Store(store_url).dataset_names()
    assert "demo" in set(app.dataframe[0].value["dataset"])


@pytest.mark.parametrize("model", ["overlap", "bm25"])
def test_typed_question_ranks_the_answer_first(store_url, model):
    app = ask_page()
    app.selectbox(key="model").select(model)
    app.text_input(key="question").input(DEMO_QUESTION)
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    table = app.dataframe[0].value
    assert list(table.columns[:6]) == ["rank", "score", "first_stage_rank", "rank_change", "gold_label", "text"]
    assert DEMO_ANSWER in table["text"].iloc[0]
    assert table["first_stage_rank"].notna().all()
    assert any("Running on: " in caption.value for caption in app.caption)


def test_dataset_question_shows_gold_labels(store_url):
    app = ask_page()
    app.selectbox(key="model").select("overlap")
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button[0].click().run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    assert table["gold_label"].notna().all()
    assert list(table["rank"]) == list(range(1, len(table) + 1))


@pytest.mark.parametrize(
    "question, message",
    [("", "empty"), ("   ", "empty"), ("why " * 300, "1,000")],
    ids=["empty", "whitespace", "too-long"],
)
def test_bad_question_shows_a_clear_error(store_url, question, message):
    app = ask_page()
    app.selectbox(key="model").select("overlap")
    app.text_input(key="question").input(question)
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert len(app.error) == 1 and message in app.error[0].value
    assert not app.dataframe


def test_untrained_smcnn_says_how_to_train(store_url):
    app = ask_page()
    app.selectbox(key="model").select("smcnn").run()
    assert not app.exception, app.exception
    assert any("train" in info.value for info in app.info)
    assert any("python -m qa_core train --model smcnn --data demo" in code.value for code in app.code)
    assert app.button[0].disabled


def test_candidate_text_is_escaped_not_rendered(store_url):
    injected = Dataset(
        "xss",
        [
            Question(
                "q1",
                "who wrote the test",
                [Candidate("d1", f"{SCRIPT} wrote the test", label=1), Candidate("d2", "nothing here", label=0)],
                split="test",
            )
        ],
    )
    store = Store(store_url)
    store.import_dataset(injected)
    store.close()

    app = ask_page()
    app.selectbox(key="dataset").select("xss")
    app.selectbox(key="model").select("overlap")
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert SCRIPT in app.dataframe[0].value["text"].iloc[0]  # grid cells are text, never HTML
    markdown = all_markdown(app)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown
    assert "<script>" not in markdown
    # Plotly renders HTML in tick labels and hover text: the token labels must arrive escaped.
    charts = [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]
    labels = [label for chart in charts for label in chart["layout"]["xaxis"]["ticktext"]]
    assert "&lt;" in labels and not any("<" in label for label in labels)
