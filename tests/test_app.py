"""The Streamlit pages through AppTest: real store (SQLite in tmp), real demo corpus, real spaCy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from db.base import NewVersion
from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.retrieval import FIRST_STAGE, FIRST_STAGE_FEEDBACK
from qa_core.services import candidate_pools, store_setup
from qa_core.services.evaluation_labels import LabelRule
from qa_core.services.experiments import train_ranker
from qa_core.types import Candidate, Dataset, Question
from tests.conftest import copy_to_models
from tests.pages import ASK, LANDING, markdown, open_page

pytestmark = pytest.mark.usefixtures("both_modes")  # local mode, and team mode as the admin

ERRORS = "pages/5_Errors.py"  # relative to app.py: its links to Ask resolve against the entrypoint
# A question both baselines answer first among the demo's BM25 candidates ("who discovered
# penicillin" is not: BM25 ranks "Some patients are allergic to penicillin." first, Fleming 8th).
DEMO_QUESTION, DEMO_ANSWER = "who developed the theory of relativity", "Albert Einstein"
SCRIPT = "<script>alert(1)</script>"
SISTINE = "demo-33"  # "Who painted the ceiling of the Sistine Chapel?", a test question


def charts(app: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]


def titled(app: AppTest, prefix: str) -> list[dict]:
    """The plotly figures whose title starts with ``prefix``."""
    return [chart for chart in charts(app) if chart["layout"]["title"]["text"].startswith(prefix)]


def highlighted(app: AppTest, heading: str) -> list[str]:
    """The highlighted texts (word weights, ``st.html``) whose heading starts with ``heading``."""
    return [element.proto.body for element in app.get("html") if f'margin-bottom:4px">{heading}' in element.proto.body]


def arcs(app: AppTest) -> list[str]:
    """The REL-arcs figures (SVG through escaped markdown)."""
    return [element.value for element in app.markdown if 'class="rl-arcs"' in element.value]


def errors_page() -> AppTest:
    app = open_page(LANDING)
    app.switch_page(ERRORS).run()
    assert not app.exception, app.exception
    return app


@pytest.fixture(scope="module")
def tiny_smcnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SM-CNN checkpoint trained for one epoch with few filters: enough for heatmaps, seconds to train."""
    path = tmp_path_factory.mktemp("smcnn") / "smcnn-tiny.pt"
    train_ranker("smcnn", load_demo(), model_config={"max_epochs": 1, "filters": 8}, checkpoint=path, progress=False)
    return path


@pytest.fixture(scope="module")
def tiny_tree_kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree kernel on the demo corpus with a one-point grid (the wh-word rules analyse questions)."""
    path = tmp_path_factory.mktemp("tree_kernel") / "tree-kernel.pt"
    config = {"cs": [1.0], "feature_weights": [1.0]}
    train_ranker("tree_kernel", load_demo(), model_config=config, checkpoint=path, progress=False)
    return path


def register(store_url: str, checkpoint: Path, model: str = "smcnn") -> None:
    store = Store(store_url)
    store.models.register_model(model, NewVersion(model, copy_to_models(checkpoint), {"dataset": "demo"}, {}, promote=True))
    store.close()


def ranking_option(table, rank: int) -> str:
    """The explain picker's label of the candidate at ``rank`` (as ``ranking.option_label`` names it)."""
    from qa_core.rankers.base import ScoredCandidate
    from qa_core.services.ranking import option_label

    row = table.iloc[rank - 1]
    candidate = Candidate("", row["text"], label=int(row["gold_label"]))
    return option_label(ScoredCandidate(candidate, float(row["score"]), rank, rank - 1))


def test_landing_page_imports_demo_and_lists_it(store_url, both_modes):
    app = open_page(LANDING)
    assert app.title[0].value == "Rerank Lab"
    signed_in = [m.value for m in app.sidebar.markdown if m.value.startswith("Signed in as")]
    # the word joiner after "@" keeps Streamlit from making a mailto link of it (as_markdown)
    assert signed_in == (["Signed in as **Ada** (ada@\u2060example.org) · admin"] if both_modes == "team" else [])
    assert any("Running on: " in caption.value for caption in app.caption)
    assert "demo" in Store(store_url).datasets.dataset_names()
    assert "demo" in set(app.dataframe[0].value["dataset"])


@pytest.mark.parametrize("model", ["overlap", "bm25"])
def test_typed_question_ranks_the_answer_first(store_url, model):
    app = open_page(ASK)
    app.selectbox(key="model").select(model)
    app.text_input(key="question").input(DEMO_QUESTION)
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    table = app.dataframe[0].value
    assert list(table.columns) == [
        "rank", "score", "tied", "first_stage_rank", "rank_change", "gold_label", "stored_label", "text"
    ]
    assert list(table["tied"]) == list(table["score"].duplicated(keep=False))
    tie_note = [c.value for c in app.caption if "share their score" in c.value]
    assert tie_note == ([f"{table['tied'].sum()} of {len(table)} candidates share their score with another (marked "
                         "tied): their order is the tie rule's, doc id descending, as trec_eval orders them."]
                        if table["tied"].any() else [])
    best = table["score"] == table["score"].iloc[0]  # overlap ties the answer with another sentence
    assert any(DEMO_ANSWER in text for text in table.loc[best, "text"])
    assert table["first_stage_rank"].notna().all()
    assert any("Running on: " in caption.value for caption in app.caption)
    collection = len(candidate_pools.collection_sentences(Store(store_url).datasets.load_dataset("demo")))
    assert (f"{len(table)} candidates, BM25's best of the dataset's {collection:,} unique sentences "
            f"({FIRST_STAGE.describe()}; {FIRST_STAGE_FEEDBACK.describe()})") in markdown(app)


def test_typed_question_can_rerank_the_whole_collection(store_url):
    """A collection this small is offered whole: every unique sentence is scored, the caption says
    how many and how BM25 found its part (issue 40)."""
    app = open_page(ASK)
    app.selectbox(key="model").select("overlap")
    app.text_input(key="question").input(DEMO_QUESTION)
    app.toggle(key="whole").set_value(True)
    app.button[0].click().run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    collection = len(candidate_pools.collection_sentences(Store(store_url).datasets.load_dataset("demo")))
    matched = int(table["first_stage_rank"].notna().sum())
    assert len(table) == collection and 0 < matched < collection
    assert (f"{collection} candidates, the whole collection: all {collection:,} unique sentences of the dataset scored "
            f"by the model (the first stage, BM25 with RM3 expansion, ranks {matched:,} of them") in markdown(app)


def test_dataset_question_shows_gold_labels(store_url):
    app = open_page(ASK)
    app.selectbox(key="model").select("overlap")
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button[0].click().run()
    assert not app.exception, app.exception
    table = app.dataframe[0].value
    assert (table["gold_label"] != "").all()  # a blank cell is a missing label
    assert list(table["rank"]) == list(range(1, len(table) + 1))
    assert "first_stage_rank" not in table and "rank_change" not in table  # no first stage: no "None" columns


@pytest.mark.parametrize(
    "question, message",
    [("", "empty"), ("   ", "empty"), ("why " * 300, "1,000"), ("x" * 1_000_000, "1,000,000 characters")],
    ids=["empty", "whitespace", "too-long", "one-megabyte"],
)
def test_bad_question_shows_a_clear_error(store_url, question, message):
    app = open_page(ASK)
    app.selectbox(key="model").select("overlap")
    app.text_input(key="question").input(question)
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert len(app.error) == 1 and message in app.error[0].value
    assert not app.dataframe


def test_untrained_smcnn_says_how_to_train(store_url):
    app = open_page(ASK)
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
    store.datasets.import_dataset(injected)
    store.close()

    app = open_page(ASK)
    app.selectbox(key="dataset").select("xss")
    app.selectbox(key="model").select("overlap")
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert SCRIPT in app.dataframe[0].value["text"].iloc[0]  # grid cells are text, never HTML
    assert "<script>" not in markdown(app)
    # The text is shown as its word weights, and the arcs are HTML: the words must arrive escaped.
    for drawn in (highlighted(app, "Answer, idf per word")[0], arcs(app)[0]):
        assert re.search(r">&lt;</(span|text)>", drawn) and "<script" not in drawn  # spaCy splits the tag: "<" is a word


# ---------------------------------------------------------------------------------- Ask: links, explanations, edits


def test_link_opens_the_question_ranked_with_class_focus_and_arcs(store_url):
    app = open_page(ASK, dataset="demo", qid=SISTINE, model="overlap")
    assert app.radio(key="source").value == "Pick a dataset question"
    assert app.selectbox(key="model").value == "overlap"
    table = app.dataframe[0].value
    assert len(table) == 6 and (table["gold_label"] != "").all()
    text = markdown(app)
    assert f"6 candidates, question {SISTINE}'s own candidates" in text
    assert "Who painted the ceiling of the Sistine Chapel?" in text
    # Word overlap reads no question analysis: the class and focus shown are the store's, said so.
    assert "Question class: **HUM** · focus: **Who**" in text and "this model does not read them" in text
    drawn = arcs(app)
    assert len(drawn) == 1  # the opened candidate's, computed on demand
    assert "REL (shared lemma)" in drawn[0] and "REL-FOCUS" not in drawn[0]  # the model's own links: no focus links
    assert highlighted(app, "Answer, idf per word")  # the overlap model's weights over the answer words
    assert not [toggle for toggle in app.toggle if toggle.key.endswith("-trees")]  # it compares no trees


@pytest.mark.parametrize(
    "params, problems",
    [
        ({"dataset": "nope", "qid": "x", "model": "zzz"}, ["unknown dataset", "unknown model", "needs a known dataset"]),
        ({"dataset": "demo", "qid": "missing"}, ["has no question 'missing'"]),
    ],
    ids=["unknown-everything", "unknown-qid"],
)
def test_bad_link_is_reported_and_ignored(store_url, params, problems):
    app = open_page(ASK, **params)
    warnings = " ".join(warning.value for warning in app.warning)
    assert all(problem in warnings for problem in problems), warnings
    assert not app.dataframe and not app.error


def test_latest_stored_label_is_shown_next_to_gold(store_url):
    question = next(q for q in load_demo().questions if q.qid == SISTINE)
    wrong = next(c for c in question.candidates if c.label == 0)
    store = Store(store_url)
    store_setup.ensure_demo(store)
    candidate_id = store.datasets.find_candidate_id("demo", SISTINE, wrong.doc_id)
    store.labels.add_label(candidate_id, "ann", 1)
    store.labels.add_label(candidate_id, "ann", 2)  # the latest counts
    store.close()

    app = open_page(ASK, dataset="demo", qid=SISTINE, model="overlap")
    table = app.dataframe[0].value
    row = table[table["text"] == wrong.text].iloc[0]
    assert row["stored_label"] == "2" and row["gold_label"] == "0"
    assert (table["stored_label"] == "").sum() == len(table) - 1  # blank, not "None"

    # A label written elsewhere after Rank (the Label page, another annotator) shows at the next run,
    # in the table and on the open candidate, without ranking again.
    top = next(c for c in question.candidates if c.text == table.iloc[0]["text"])
    store = Store(store_url)
    store.labels.add_label(store.datasets.find_candidate_id("demo", SISTINE, top.doc_id), "bob", 4)
    store.close()
    app.run()
    assert not app.exception, app.exception
    assert app.dataframe[0].value.iloc[0]["stored_label"] == "4"
    assert any(line.startswith("**#1** ·") and line.endswith("· stored 4") for line in markdown(app).splitlines())


def test_judge_in_place_on_ask_writes_the_store_and_the_table(store_url, both_modes):
    """The open candidate judged on Ask as the Label page's annotator (local: the name typed here;
    team: the signed-in user): the store holds the label, the table's stored label shows it at once,
    and undo takes it back (kept in the history)."""
    app = open_page(ASK, dataset="demo", qid=SISTINE, model="overlap")
    if both_modes == "local":
        app.button(key="judge-grade-3").click().run()  # no annotator yet: it says a name is needed
        assert "Not saved: type your name (as on the Label page) to judge here" in [w.value for w in app.warning]
        app.text_input(key="judge_name").set_value("alice").run()
    annotator = "alice" if both_modes == "local" else "ada@example.org"  # as the Label page writes it
    first = app.dataframe[0].value.iloc[0]
    assert first["stored_label"] == ""
    app.button(key="judge-grade-3").click().run()
    assert not app.exception, app.exception
    assert app.dataframe[0].value.iloc[0]["stored_label"] == "3"
    store = Store(store_url)
    question = next(q for q in load_demo().questions if q.qid == SISTINE)
    candidate_id = store.datasets.find_candidate_id("demo", SISTINE, next(c.doc_id for c in question.candidates
                                                                 if c.text == first["text"]))
    assert [(h["annotator"], h["value"], h["retracted_at"]) for h in store.labels.label_history(candidate_id)] == [
        (annotator, 3, None)]
    app.button(key="judge-undo").click().run()
    assert not app.exception, app.exception
    assert app.dataframe[0].value.iloc[0]["stored_label"] == ""
    [undone] = store.labels.label_history(candidate_id)
    assert undone["retracted_at"] is not None
    store.close()


def test_typed_question_is_not_judged_in_place(store_url):
    app = open_page(ASK)
    app.selectbox(key="model").select("overlap")
    app.text_input(key="question").input(DEMO_QUESTION)
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert not [b for b in app.button if str(b.key).startswith("judge-grade")]
    assert any("typed question's candidates belong to other questions" in c.value for c in app.caption)


def test_tree_kernel_draws_its_own_focus_links_and_trees(store_url, tiny_tree_kernel):
    register(store_url, tiny_tree_kernel, "tree_kernel")
    app = open_page(ASK, dataset="demo", qid=SISTINE, model="tree_kernel")
    assert not app.error, [e.value for e in app.error]
    assert "read by this model" in markdown(app)  # the class and focus come from its own analyzer
    assert all(kind in arcs(app)[0] for kind in ("REL (shared lemma)", "REL-FOCUS-HUM (focus → entity)"))  # "Raphael" is a PERSON
    assert not app.code
    app.toggle(key="r1-1-trees").set_value(True).run()
    trees = [code.value for code in app.code]
    assert len(trees) == 2 and all(tree.startswith("(S\n  (") for tree in trees)  # one constituent a line
    assert "REL-FOCUS-HUM" in trees[0] and re.search(r"\(REL-FOCUS-HUM\n\s+\(NNP \w+\)\)", trees[1])  # its top answer's person


def test_any_candidate_opens_and_the_missed_answers_filter(store_url):
    app = open_page(ASK, dataset="demo", qid=SISTINE, model="bm25")
    table = app.dataframe[0].value
    last = len(table)
    app.selectbox(key="r1-open").select(last).run()
    assert not app.exception, app.exception
    assert f"**#{last}** · score {table['score'].iloc[-1]:.4f}" in markdown(app)
    assert len(highlighted(app, "Answer, occlusion per word")) == 1 and len(arcs(app)) == 1  # bm25's DEV-chosen explainer
    # The filter keeps the right answers ranked below a wrong one, and only those.
    gold = [int(g) for g in table["gold_label"]]
    expected = [r for r, g in zip(table["rank"], gold) if g > 0 and 0 in gold[: r - 1]]
    app.toggle(key="r1-missed").set_value(True).run()
    if expected:
        assert app.selectbox(key="r1-open").options == [ranking_option(table, r) for r in expected]
    else:
        assert any("No right answer is ranked below a wrong one" in info.value for info in app.info)


def submit_edit(app: AppTest, rank: int, text: str) -> AppTest:
    app.text_area(key=f"r1-{rank}-text").input(text)
    next(button for button in app.button if button.label == "Score edited text").click().run()
    assert not app.exception, app.exception
    return app


def test_counterfactual_edit_rescored_without_reranking(store_url):
    app = open_page(ASK, dataset="demo", qid=SISTINE, model="overlap")
    before = app.dataframe[0].value
    weights = len(highlighted(app, "Answer, idf per word"))
    top = before["text"].iloc[0]
    submit_edit(app, 1, top + " The ceiling was painted too.")  # adds the missing question word "ceiling"
    assert not app.error, [e.value for e in app.error]
    metric = app.metric[0]
    assert metric.label == "Score of the edited text"
    assert float(metric.value) > before["score"].iloc[0] and metric.delta.startswith("+")
    assert any("Would rank #1 of 6" in caption.value for caption in app.caption)
    assert len(highlighted(app, "Answer, idf per word")) == weights + 1  # only the edit is explained
    assert app.dataframe[0].value.equals(before)  # the ranking is left alone
    # Another explainer picked: the edit's heatmap is that explainer's too (it was the model's own, always).
    next(box for box in app.selectbox if box.label == "Explainer").select("occlusion").run()
    assert len(highlighted(app, "Answer, occlusion per word")) == 2 and not highlighted(app, "Answer, idf per word")
    assert float(app.metric[0].value) == float(metric.value)  # the same edit, scored alike


@pytest.mark.parametrize("text, message", [("  ", "empty"), ("x" * 1_000_000, "5,000")], ids=["empty", "one-megabyte"])
def test_counterfactual_bad_edit_shows_a_clear_error(store_url, text, message):
    app = submit_edit(open_page(ASK, dataset="demo", qid=SISTINE, model="overlap"), 1, text)
    assert len(app.error) == 1 and message in app.error[0].value
    assert not app.metric


def test_trained_smcnn_shows_matrix_and_saliency_heatmaps(store_url, tiny_smcnn):
    register(store_url, tiny_smcnn)
    app = open_page(ASK, dataset="demo", qid=SISTINE, model="smcnn")
    assert not app.error, [e.value for e in app.error]
    explainer = next(box for box in app.selectbox if box.label == "Explainer")
    assert "(default" in explainer.options[0] and len(explainer.options) == 5  # the default first, then the others
    explainer.select("integrated_gradients").run()
    assert highlighted(app, "Answer, integrated gradients per word")
    assert any("explainer integrated gradients" in caption.value for caption in app.caption)  # its own faithfulness
    next(box for box in app.selectbox if box.label == "Explainer").select("model").run()
    matrices = titled(app, "similarity: question × answer words")
    assert len(matrices) == 1  # the opened candidate's
    cosine = [value for row in matrices[0]["data"][0]["z"] for value in row]
    assert all(-1.0001 <= value <= 1.0001 for value in cosine) and max(cosine) > 0.99  # raw cosines, shared words = 1
    # Hover: each word's raw value and its share of the text's largest (the colour).
    values = re.findall(r"saliency ([-\d.e+]+) \(([-+]\d\.\d\d) of", highlighted(app, "Answer, saliency per word")[0])
    assert max(abs(float(scaled)) for _, scaled in values) == pytest.approx(1.0)  # colour: scaled
    raw = [float(value) for value, _ in values]
    assert max(raw) > 0 and max(raw) != pytest.approx(1.0)  # raw gradient norms, not the scaled colours
    assert highlighted(app, "Question, saliency per word")  # SM-CNN's question side too
    submit_edit(app, 1, "Michelangelo painted the ceiling of the Sistine Chapel.")
    assert app.metric and len(titled(app, "similarity: question × answer words")) == 2


# ---------------------------------------------------------------------------------- Errors


def test_errors_page_lists_worst_questions_first_with_links_to_ask(store_url):
    app = errors_page()
    app.selectbox(key="model").select("overlap").run()
    assert not app.exception, app.exception
    assert app.selectbox(key="split-demo").value == "test"
    worst = app.dataframe[0].value
    assert len(worst) == 28 and set(worst["split"]) == {"test"}
    assert list(worst["AP"]) == sorted(worst["AP"]) and worst["AP"].iloc[0] < worst["AP"].iloc[-1]
    assert worst["ask"].iloc[0] == f"/Ask?dataset=demo&qid={worst['qid'].iloc[0]}&model=overlap"
    links = app.get("page_link")
    assert len(links) == 10 and all(link.proto.page == "Ask" for link in links)  # the ten worst are linked
    # the worst question has a wrong answer above its right one: its link opens the contrastive view
    assert links[0].proto.query_string == f"dataset=demo&qid={worst['qid'].iloc[0]}&model=overlap&view=contrast"
    slices = [frame.value for frame in app.dataframe[1:]]
    assert [frame.columns[0] for frame in slices] == ["question class", "question length", "lexical overlap", "label source"]
    assert {"HUM", "LOC", "NUM"} <= set(slices[0]["question class"]) and slices[0]["questions"].sum() == 28
    assert len(titled(app, "mean AP by")) == 4


def test_errors_label_source_follows_the_store(store_url):
    demo = {q.qid: q for q in load_demo().questions}
    store = Store(store_url)
    store_setup.ensure_demo(store)
    labelled, adjudicated = demo[SISTINE], demo["demo-39"]
    wrong = next(c for c in labelled.candidates if c.label == 0)
    store.labels.add_label(store.datasets.find_candidate_id("demo", SISTINE, wrong.doc_id), "ann", 1)  # a second correct answer
    store.labels.adjudicate(store.datasets.find_candidate_id("demo", "demo-39", adjudicated.candidates[0].doc_id), 0, "lead")
    store.close()

    app = errors_page()
    app.selectbox(key="model").select("overlap").run()
    gold = app.dataframe[0].value.set_index("qid")  # the default rule: app labels change no metric
    assert not gold["why"].isna().any() and (gold["why"] == "").any()  # no contrast: a blank cell, not "None"
    assert set(gold["label_source"]) == {"gold"} and gold.loc[SISTINE, "correct"] == 1
    assert any(caption.value.count("Labels: gold") == 1 for caption in app.caption)
    app.radio(key="labels").set_value(LabelRule.TRAINING).run()
    worst = app.dataframe[0].value.set_index("qid")
    assert worst.loc[SISTINE, "label_source"] == "labels" and worst.loc[SISTINE, "correct"] == 2
    assert worst.loc["demo-39", "label_source"] == "adjudicated"
    sources = app.dataframe[4].value.set_index("label source")["questions"]
    assert sources.to_dict() == {"gold": len(worst) - 2, "labels": 1, "adjudicated": 1}


def test_errors_slice_words_are_found_again_for_a_new_version_rule_or_label(store_url, tiny_smcnn):
    """Words found for one model version, label rule and labels are never shown for others: the page
    offers the button again. A one-question slice, and a version with the same weights, keep the
    slice's questions and their order the same throughout."""

    def words_shown() -> bool:
        return (any("top words from" in caption.value for caption in app.caption)
                or any("No wrong answer is ranked above a right one in this slice" in info.value for info in app.info))

    def find_words() -> None:
        app.button(key="words-run").click().run()
        assert not app.exception, app.exception
        assert words_shown() and "words-run" not in [button.key for button in app.button]  # not drawn above them

    register(store_url, tiny_smcnn)
    app = errors_page()
    app.selectbox(key="model").select("smcnn").run()
    app.selectbox(key="words-slice").select("a question class").run()
    app.selectbox(key="words-class").select("DESC").run()
    [qid] = app.dataframe[0].value.query("`class` == 'DESC'")["qid"]
    find_words()
    register(store_url, tiny_smcnn)  # a new version
    app.run()
    assert not words_shown()
    find_words()
    app.radio(key="labels").set_value(LabelRule.TRAINING).run()  # no labels in the store yet: the same labels
    assert not words_shown()
    find_words()
    candidate = next(q for q in load_demo().questions if q.qid == qid).candidates[0]
    store = Store(store_url)
    store.labels.add_label(store.datasets.find_candidate_id("demo", qid, candidate.doc_id), "ann", 0 if candidate.label else 1)
    store.close()
    app.run()
    assert not words_shown()


def test_errors_page_without_model_or_labels_says_why(store_url):
    store = Store(store_url)
    store.datasets.import_dataset(Dataset("unlabelled", [Question("q1", "who wrote it", [Candidate("d1", "Ann wrote it")], split="test")]))
    store.close()
    app = errors_page()
    app.selectbox(key="model").select("smcnn").run()
    assert any("no version trained on or promoted for" in info.value for info in app.info) and not app.dataframe
    assert any("python -m qa_core train --model smcnn" in code.value for code in app.code)
    app.selectbox(key="model").select("overlap")
    app.selectbox(key="dataset").select("unlabelled").run()
    assert not app.exception, app.exception
    assert any("No question here has labels" in info.value for info in app.info) and not app.dataframe


def test_errors_page_escapes_question_text(store_url):
    store = Store(store_url)
    store.datasets.import_dataset(
        Dataset("xss", [Question("q1", f"who {SCRIPT} wrote *it*", [Candidate("d1", "Ann wrote it", label=1),
                                                                   Candidate("d2", "nothing", label=0)], split="test")])
    )
    store.close()
    app = errors_page()
    app.selectbox(key="model").select("overlap").run()
    assert SCRIPT in app.dataframe[0].value["question"].iloc[0]  # grid cells are text
    label = app.get("page_link")[0].proto.label
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in label and "\\*it\\*" in label and "<script>" not in label
