"""The Compare and Label pages through AppTest: real store (SQLite in tmp), real demo corpus, the
baseline models (overlap, BM25) and real spaCy."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.services import store_setup
from qa_core.types import Candidate, Dataset, Question
from tests.pages import COMPARE, LABEL, markdown, open_page

# A question both baselines answer first among the demo's BM25 candidates ("who discovered
# penicillin" is not: BM25 ranks "Some patients are allergic to penicillin." first, Fleming 8th).
DEMO_QUESTION, DEMO_ANSWER = "who developed the theory of relativity", "Albert Einstein"
SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def import_xss(url: str) -> None:
    store = Store(url)
    store.datasets.import_dataset(
        Dataset(
            "xss",
            [
                Question(
                    "q1",
                    "who wrote the test",
                    [Candidate("d1", f"{SCRIPT} wrote the test", label=1), Candidate("d2", "nothing here", label=0)],
                    split="test",
                ),
                Question("q2", "who ran the test", [Candidate("d3", "the test ran", label=1)], split="test"),
            ],
        )
    )
    store.close()


# ============================================================================ Compare


def test_compare_two_models_on_a_typed_question(store_url):
    app = open_page(COMPARE)
    assert app.multiselect(key="models").value == ["bm25", "overlap"]  # the ready baselines by default
    app.text_input(key="question").input(DEMO_QUESTION)
    app.button(key="compare_question").click().run()
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    text = markdown(app)
    assert "**bm25**" in text and "**overlap**" in text
    lists = [m.value for m in app.markdown if m.value.startswith("1. ")]
    # bm25 puts the answer first; overlap gives it the best score but ties it with "The theory of
    # relativity predicts ...", which the tie rule (doc id descending, trec_eval's) puts first.
    assert len(lists) == 2 and DEMO_ANSWER in lists[0].splitlines()[0] and DEMO_ANSWER in lists[1].splitlines()[1]
    charts = [json.loads(c.proto.spec) for c in app.get("plotly_chart")]
    (chart,) = [c for c in charts if c["layout"]["title"]["text"].startswith("Rank of the top")]  # the bump chart
    assert chart["layout"]["yaxis"]["autorange"] == "reversed"
    assert all(trace["x"] == ["bm25", "overlap"] for trace in chart["data"]) and len(chart["data"]) >= 2

    # Issue 16: any candidate opened through every model at once, explained when opened; issue 31:
    # one tab per model, each explanation as wide as Ask's.
    def explained() -> list[str]:
        return [tab.label for tab in app.tabs if re.match(r"^(bm25|overlap) · #\d+ · score", tab.label)]

    # the reference's first candidate, the answer, is overlap's second (the tie above)
    assert [line.split(" · score")[0] for line in explained()] == ["bm25 · #1", "overlap · #2"]
    answers = [html.proto.body for html in app.get("html") if ">Answer, " in html.proto.body]
    assert len(answers) == 2 and sum('class="rl-arcs"' in m.value for m in app.markdown) == 2
    last = app.selectbox(key="compare_open").options[-1]
    app.selectbox(key="compare_open").select_index(len(app.selectbox(key="compare_open").options) - 1).run()
    assert not app.exception, app.exception
    assert app.selectbox(key="compare_open").value == int(last.split(" · ")[0].lstrip("#"))
    assert any(f" · #{app.selectbox(key='compare_open').value} · " in line for line in explained() if "bm25" in line)

    # A counterfactual edit belongs to its comparison: another question compared shows no edit's score
    # and the edit box holds the new candidate's text (its key once named only the model and rank).
    def bm25_box():
        (box,) = [area for area in app.text_area if area.key.startswith("compare-") and "-bm25-" in area.key]
        return box

    app.selectbox(key="compare_open").select_index(0).run()
    bm25_box().input(f"{DEMO_ANSWER} developed the theory of relativity in 1905")
    next(button for button in app.button if button.label == "Score edited text").click().run()
    assert [metric.label for metric in app.metric] == ["Score of the edited text"]
    app.text_input(key="question").input("who discovered penicillin")
    app.button(key="compare_question").click().run()
    assert not app.exception, app.exception
    assert not app.metric and not [c.value for c in app.caption if c.value.startswith("Would rank #")]
    first = [m.value for m in app.markdown if m.value.startswith("1. ")][0].splitlines()[0]
    assert app.selectbox(key="compare_open").value == 1 and bm25_box().value in first and "penicillin" in first


def test_compare_on_a_split_shows_deltas_tests_and_disagreements(store_url):
    app = open_page(COMPARE)
    app.radio(key="view").set_value("Whole split").run()
    assert app.selectbox(key="split").value == "test"
    app.button(key="compare_split").click().run()
    assert not app.exception, app.exception
    summary = app.dataframe[1].value.iloc[0]
    assert (summary["model"], summary["vs"], summary["questions"]) == ("overlap", "bm25", 28)
    assert summary["wins"] + summary["ties"] + summary["losses"] == 28
    # Issue 17: the randomisation test (Holm-adjusted over the pairs) replaces the Wilcoxon test.
    assert 0.0 <= summary["t-test p"] <= 1.0 and 0.0 <= summary["randomisation p"] <= 1.0
    assert any("paired t-test" in c.value and "randomisation test" in c.value for c in app.caption)
    # both baselines tie scores on the demo: each says how many and what the tie order decides
    tied = [c.value for c in app.caption if c.value.startswith("Tied scores, ")]
    assert [line.split(":")[0] for line in tied] == ["Tied scores, bm25", "Tied scores, overlap"]
    assert all("of 163 candidates" in line and "worst..best" in line for line in tied)
    table = app.dataframe[2].value
    disagree = (~table["same top-1"]) | (table["Δ overlap"].abs() > 0.1)
    assert len(table) < 28 and disagree.all()
    app.toggle(key="only_disagreements").set_value(False).run()
    assert len(app.dataframe[2].value) == 28


def test_compare_untrained_model_names_the_train_command(store_url):
    app = open_page(COMPARE)
    app.multiselect(key="models").set_value(["overlap", "smcnn"]).run()
    assert not app.exception, app.exception
    assert any("no version trained on or promoted for" in info.value for info in app.info)
    assert any("python -m qa_core train --model smcnn --data demo" in code.value for code in app.code)
    assert app.button(key="compare_question").disabled


def test_compare_needs_two_models_and_a_question(store_url):
    app = open_page(COMPARE)
    app.multiselect(key="models").set_value(["overlap"]).run()
    assert any("two or three" in info.value for info in app.info)
    assert app.button(key="compare_question").disabled
    app.multiselect(key="models").set_value(["overlap", "bm25"]).run()
    app.text_input(key="question").input("   ")
    app.button(key="compare_question").click().run()
    assert not app.exception, app.exception
    assert len(app.error) == 1 and "empty" in app.error[0].value
    assert not app.get("plotly_chart")


def test_compare_judges_the_opened_candidate_in_place(store_url):
    """Judge in place on Compare's one-question view (issue 37), as the Label page's annotator."""
    app = open_page(COMPARE)
    app.session_state["annotator"] = "cleo"
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button(key="compare_question").click().run()

    def stored() -> list[str]:
        return [c.value for c in app.caption if c.value.startswith("Stored label:")]

    assert stored() == ["Stored label: none (latest in the store)"]
    app.button(key="judge-grade-4").click().run()
    assert not app.exception, app.exception
    assert stored() == ["Stored label: 4 (latest in the store)"]
    store = Store(store_url)
    [(candidate_id, grades)] = store.labels.current_labels("demo", "cleo").items()
    assert grades == {"cleo": 4}
    labelled = next(c.value for c in app.caption if c.value.startswith("Labelled "))
    app.button(key="judge-undo").click().run()
    assert stored() == ["Stored label: none (latest in the store)"]
    assert store.labels.current_labels("demo", "cleo") == {}
    # The pair as saving named it ("Labelled demo-01 / demo-01-0 as 4"), not the store's ids.
    pair = labelled.removeprefix("Labelled ").split(" as ")[0]
    assert f"Took back your label 4 of {pair} (it stays in the history)." in [c.value for c in app.caption]
    store.labels.add_label(candidate_id, "dora", 2)  # another annotator, elsewhere: shown at the next run
    store.close()
    app.run()
    assert stored() == ["Stored label: 2 (latest in the store)"]


def test_compare_says_a_name_is_needed_when_judged_before_one(store_url):
    """Issue 45: before an annotator is named, the grade and undo buttons (and their keys) did
    nothing and said nothing; pressed now, they say in one sentence that a name is needed."""
    app = open_page(COMPARE)
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button(key="compare_question").click().run()
    assert not app.button(key="judge-grade-3").disabled and not app.button(key="judge-undo").disabled
    app.button(key="judge-grade-3").click().run()
    assert not app.exception, app.exception
    assert [w.value for w in app.warning] == ["Not saved: type your name (as on the Label page) to judge here"]
    app.button(key="judge-undo").click().run()
    assert [w.value for w in app.warning] == ["Not undone: type your name (as on the Label page) to undo your label"]
    assert Store(store_url).labels.current_labels("demo") == {}


def test_compare_escapes_candidate_text(store_url):
    import_xss(store_url)
    app = open_page(COMPARE)
    app.selectbox(key="dataset").select("xss")
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button(key="compare_question").click().run()
    assert not app.exception, app.exception
    text = markdown(app)
    assert ESCAPED in text and "<script>" not in text
    charts = [json.loads(c.proto.spec) for c in app.get("plotly_chart")]
    (chart,) = [c for c in charts if c["layout"]["title"]["text"].startswith("Rank of the top")]
    names = [trace["name"] for trace in chart["data"]]
    assert any(ESCAPED in name for name in names) and not any("<script>" in name for name in names)
    assert not any("<script>" in json.dumps(c) for c in charts)
    explained = [html.proto.body for html in app.get("html") if "rl-highlighted" in html.proto.body] + [
        m.value for m in app.markdown if "rl-arcs" in m.value]
    assert len(explained) >= 4 and not any("<script" in body for body in explained)  # the explanations' too


def test_a_comparison_stays_with_its_dataset(store_url):
    """A comparison (either view) is not shown under another dataset, nor fused with its rankers and
    DEV questions; choosing its dataset again shows it, until that dataset is imported again."""
    store = Store(store_url)
    store_setup.ensure_demo(store)
    store.datasets.import_dataset(Dataset("other", [dataclasses.replace(q, qid=f"x{q.qid}") for q in load_demo().questions]))
    store.close()
    app = open_page(COMPARE)
    assert app.selectbox(key="dataset").value == "demo"
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button(key="compare_question").click().run()
    assert not app.exception, app.exception
    assert [h.value for h in app.subheader][:1] == ["Rankings side by side"]

    def moved_on() -> None:
        app.selectbox(key="dataset").select("other").run()
        assert not app.exception, app.exception
        assert not app.subheader and not app.get("plotly_chart") and not app.tabs and not app.text_area
        assert any(c.value.startswith("Your comparison") and " on demo is not shown here" in c.value for c in app.caption)

    moved_on()
    app.radio(key="view").set_value("Whole split").run()
    app.selectbox(key="dataset").select("demo").run()
    app.button(key="compare_split").click().run()
    assert not app.exception, app.exception
    assert [b.key for b in app.button if b.key == "fuse"] == ["fuse"]
    moved_on()
    assert not [b for b in app.button if b.key == "fuse"]
    app.selectbox(key="dataset").select("demo").run()  # its own dataset again: shown, fusable
    assert any(c.value.startswith("Δ = model − vs") and "of demo" in c.value for c in app.caption)
    assert [b.key for b in app.button if b.key == "fuse"] == ["fuse"]
    store = Store(store_url)
    store.datasets.import_dataset(load_demo(), replace=True)  # a new import: the kept runs are of the old one
    store.close()
    app.run()
    assert not app.exception, app.exception
    assert not [b for b in app.button if b.key == "fuse"]
    assert any("demo is not shown: the dataset changed since (imported again" in c.value for c in app.caption)


# ============================================================================ Label


def start_labelling(name: str) -> AppTest:
    app = open_page(LABEL)
    assert any("Choose your name" in info.value for info in app.info)
    app.text_input(key="new_annotator").input(name).run()
    assert not app.exception, app.exception
    return app


def shown_pair(app: AppTest) -> str:
    """The "qid · doc_id" caption of the pair on screen."""
    return next(c.value for c in app.caption if " · " in c.value and "labelled" not in c.value)


def test_label_undo_skip_write_to_the_store_with_history(store_url):
    app = start_labelling("alice")
    store = Store(store_url)
    first = shown_pair(app)
    app.button(key="grade-2").click().run()
    second = shown_pair(app)
    assert second != first
    app.button(key="grade-0").click().run()
    labels = store.labels.current_labels("demo", "alice")
    assert sorted(grades["alice"] for grades in labels.values()) == [0, 2]
    assert "2 of" in app.get("progress")[0].proto.text

    app.button(key="undo").click().run()  # takes back the 0 and shows that pair again
    assert not app.exception, app.exception
    assert shown_pair(app) == second
    assert [grades["alice"] for grades in store.labels.current_labels("demo", "alice").values()] == [2]
    undone = next(c for c, grades in labels.items() if grades["alice"] == 0)
    history = store.labels.label_history(undone)
    assert len(history) == 1 and history[0]["value"] == 0 and history[0]["retracted_at"] is not None

    app.button(key="skip").click().run()
    assert shown_pair(app) not in (first, second)
    assert len(store.labels.current_labels("demo", "alice")) == 1  # a skip writes no label
    # The name is remembered: the annotator box now shows it, and the next session knows it.
    assert [s for s in app.selectbox if s.label == "Annotator"][0].value == "alice"
    assert "alice" in [s for s in open_page(LABEL).selectbox if s.label == "Annotator"][0].options
    store.close()


def test_the_queue_hands_out_train_pairs_unless_test_is_chosen(store_url):
    splits = {q.qid: q.split for q in load_demo().questions}
    app = start_labelling("alice")
    assert app.selectbox(key="label_split-demo").value == "train"
    seen = set()
    for _ in range(4):
        seen.add(splits[shown_pair(app).split(" · ")[0]])
        app.button(key="skip").click().run()
    assert seen == {"train"}
    assert not any("TEST pairs" in c.value for c in app.caption)
    app.selectbox(key="label_split-demo").select("test").run()
    assert splits[shown_pair(app).split(" · ")[0]] == "test"
    assert any("only under the training-label rule" in c.value for c in app.caption)


def test_two_sessions_are_never_shown_the_same_pair(store_url):
    first, second = start_labelling("alice"), start_labelling("alice")
    assert shown_pair(first) != shown_pair(second)
    first.run()
    second.run()  # reruns keep each session's own pair
    assert shown_pair(first) != shown_pair(second)


@pytest.mark.parametrize("order, models", [("uncertainty", ["overlap"]), ("disagreement", ["overlap", "bm25"])])
def test_model_based_orders_label(store_url, order, models):
    app = start_labelling("alice")
    app.selectbox(key="order").select(order).run()
    if order == "uncertainty":
        app.selectbox(key="order_model").select(models[0]).run()
    else:
        app.multiselect(key="order_models").set_value(models).run()
    assert not app.exception, app.exception
    app.button(key="grade-1").click().run()
    assert [g["alice"] for g in Store(store_url).labels.current_labels("demo", "alice").values()] == [1]


def test_uncertainty_with_untrained_model_names_the_train_command(store_url):
    app = start_labelling("alice")
    app.selectbox(key="order").select("uncertainty").run()
    app.selectbox(key="order_model").select("smcnn").run()
    assert not app.exception, app.exception
    assert any("python -m qa_core train --model smcnn --data demo" in code.value for code in app.code)
    assert not [b for b in app.button if b.key == "grade-0"]


def test_agreement_and_review_settle_a_conflict(store_url):
    store = Store(store_url)
    store_setup.ensure_demo(store)
    pairs = [r.candidate_id for r in store.datasets.candidate_rows("demo")][:6]
    for candidate_id, (a, b) in zip(pairs, [(0, 0), (1, 1), (2, 2), (0, 1), (3, 3), (4, 2)]):
        store.labels.add_label(candidate_id, "ann", a)
        store.labels.add_label(candidate_id, "bob", b)
    app = open_page(LABEL)
    app.radio(key="label_view").set_value("Agreement").run()
    assert not app.exception, app.exception
    kappas = app.dataframe[0].value
    assert (kappas.iloc[0]["annotator"], kappas.iloc[0]["other annotator"], kappas.iloc[0]["pairs both judged"]) == (
        "ann",
        "bob",
        6,
    )
    assert kappas.iloc[0]["note"] == "not enough overlap"  # 6 shared pairs: below 10
    # Each metric's value is short (a value does not wrap: a longer one was cut off), the detail under it.
    metrics = {m.label: m.value for m in app.metric}
    captions = [c.value for c in app.caption]
    assert metrics["Pairs judged by two or more"] == "6" and "100% of 6 judged" in captions
    # Six shared pairs are below the threshold: no coefficient passes for agreement.
    assert metrics["Krippendorff's α (ordinal)"] == "—" and "not enough overlap (6 shared)" in captions
    assert any("Not enough overlap" in w.value for w in app.warning)

    app.radio(key="label_view").set_value("Review conflicts").run()
    conflicts = app.dataframe[0].value
    assert len(conflicts) == 2 and set(conflicts["labels"]) == {"ann: 0, bob: 1", "ann: 4, bob: 2"}
    assert app.button(key="settle-1").disabled  # a reviewer must be named
    [s for s in app.selectbox if s.label == "Annotator"][0].select("ann").run()
    assert app.button(key="settle-1").disabled  # ann is a party to this conflict
    assert any("another reviewer" in w.value for w in app.warning)
    [s for s in app.selectbox if s.label == "Annotator"][0].select("New annotator…").run()
    app.text_input(key="new_annotator").input("carol").run()  # not a party: may settle it

    def note():
        return next(box for box in app.text_input if box.label == "Note (optional)")

    note().input("written for the first conflict").run()
    app.selectbox(key="conflict").select_index(1).run()
    assert note().value == ""  # a note belongs to the conflict it was written for
    note().input("bob misread it").run()
    app.button(key="settle-1").click().run()
    assert not app.exception, app.exception
    adjudications = store.labels.adjudications("demo")
    assert [(a["value"], a["adjudicator"], a["note"]) for a in adjudications.values()] == [(1, "carol", "bob misread it")]
    assert len(app.dataframe[0].value) == 1 and note().value == ""
    store.close()


def test_label_escapes_text(store_url):
    import_xss(store_url)
    app = open_page(LABEL)
    app.selectbox(key="label_dataset").select("xss").run()
    app.text_input(key="new_annotator").input("alice").run()
    seen = set()
    for _ in range(3):
        seen.add(markdown(app))
        app.button(key="skip").click().run()
    text = "\n".join(seen)
    assert ESCAPED in text and "<script>" not in text


def test_label_needs_a_name(store_url):
    app = open_page(LABEL)
    app.text_input(key="new_annotator").input("   ").run()
    assert not app.exception, app.exception
    assert any("Choose your name" in info.value for info in app.info)
    assert not [b for b in app.button if b.key == "grade-0"]


def test_compare_split_without_gold_labels_says_so(store_url):
    store = Store(store_url)
    store.datasets.import_dataset(
        Dataset("unjudged", [Question("q1", "who wrote it", [Candidate("d1", "she wrote it"), Candidate("d2", "no")], split="test")])
    )
    store.close()
    app = open_page(COMPARE)
    app.selectbox(key="dataset").select("unjudged")
    app.radio(key="view").set_value("Whole split").run()
    app.button(key="compare_split").click().run()
    assert not app.exception, app.exception
    assert len(app.error) == 1 and "has labels (under the label rule chosen)" in app.error[0].value
