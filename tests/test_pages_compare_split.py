"""The Compare page on a whole split through AppTest: the significance table for three models, the
delta chart and scatter carrying each question's qid, links to Ask, "fuse these" (a ranx fusion kept in
the store and then offered as a model), and seeds of one model against another's from run files. Real
store (SQLite in tmp), real demo corpus, the baseline models."""

from __future__ import annotations

import json

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.data.exporters import write_trec_run
from qa_core.evaluation import evaluate, qrels_from_questions
from tests.pages import COMPARE, open_page

pytestmark = pytest.mark.usefixtures("both_modes")  # local mode, and team mode as the admin

FUSION = "fusion:rrf(bm25+overlap)"
TEST_SPLIT = load_demo().split("test")


def charts(app) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]


def compare_on_split(app, button: str = "compare_split"):
    app.button(key=button).click().run()
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    return app


def test_fuse_these_then_compare_three_models_with_holm(store_url):
    app = open_page(COMPARE)
    app.radio(key="view").set_value("Whole split").run()
    compare_on_split(app)
    app.selectbox(key="fusion_method").select("rrf")
    app.button(key="fuse").click().run()
    assert not app.exception, app.exception
    # as_markdown puts an invisible word joiner after the tag's colon (no ":rrf" directive)
    assert any(FUSION in s.value.replace("\u2060", "") and "DEV MAP" in s.value for s in app.success)
    store = Store(store_url)
    kept = [run for run in store.runs.runs("demo") if run["tag"] == FUSION]
    assert sorted(run["split"] for run in kept) == ["dev", "test"]
    assert kept[0]["metrics"]["members"] == ["bm25", "overlap"] and "k" in kept[0]["metrics"]["params"]
    store.close()

    assert FUSION in app.multiselect(key="models").options  # offered like any model
    app.multiselect(key="models").set_value(["bm25", "overlap", FUSION]).run()
    compare_on_split(app)
    means = app.dataframe[0].value
    assert list(means.index) == ["bm25", "overlap", FUSION] and "map CI low" in means
    pairs = app.dataframe[1].value
    assert [(row.vs, row.model) for row in pairs.itertuples()] == [
        ("bm25", "overlap"), ("bm25", FUSION), ("overlap", FUSION)]
    assert (pairs["randomisation p (Holm)"] >= pairs["randomisation p"]).all()
    assert pairs["MDD"].gt(0).all() and pairs["verdict"].str.contains("significant").all()
    assert any("Holm-adjusted over the 3 pair(s)" in c.value for c in app.caption)

    delta, scatter = charts(app)
    bars = delta["data"][0]
    assert bars["type"] == "bar" and len(bars["y"]) == 28 and bars["y"] == sorted(bars["y"], reverse=True)
    assert {qid for (qid,) in bars["customdata"]} == {q.qid for q in TEST_SPLIT}
    assert scatter["data"][1]["mode"] == "markers" and len(scatter["data"][1]["customdata"]) == 28
    assert app.selectbox(key="chart_model").options == ["overlap", FUSION]

    app.toggle(key="only_disagreements").set_value(False).run()
    table = app.dataframe[2].value
    assert len(table) == 28
    # The Ask links name the question and a model Ask can load (the fused run is not one).
    assert table.loc["demo-33", "ask"] == "/Ask?dataset=demo&qid=demo-33&model=overlap"
    app.selectbox(key="chart_model").select(FUSION).run()
    assert f"{FUSION} − bm25" in charts(app)[0]["layout"]["title"]["text"].replace("<br>", " ")  # wrapped, not cut

    app.radio(key="view").set_value("One question").run()  # a fused run cannot rank a new question
    assert any("compare them on the whole split" in info.value for info in app.info)
    assert app.button(key="compare_question").disabled


def test_the_disagreement_filter_keeps_the_largest(store_url):
    app = open_page(COMPARE)
    app.radio(key="view").set_value("Whole split").run()
    compare_on_split(app)
    app.number_input(key="most").set_value(2).run()
    table = app.dataframe[2].value
    assert len(table) == 2 and (table["Δ overlap"].abs().diff().dropna() <= 0).all()


@pytest.fixture
def seed_runs(tmp_path, monkeypatch):
    """Run files in a seed-run folder: alpha (two seeds: gold answers first, then last) and beta (one)."""
    folder = tmp_path / "seed_runs" / "demo"
    folder.mkdir(parents=True)
    monkeypatch.setenv("RERANK_LAB_SEED_RUNS", str(folder.parent))
    runs = {}
    for name, sign in (("alpha.seed1", 1), ("alpha.seed2", -1), ("beta.seed7", 1)):
        runs[name] = {q.qid: {c.doc_id: sign * c.label + i / 100 for i, c in enumerate(q.candidates)}
                      for q in TEST_SPLIT}
        write_trec_run(runs[name], folder / f"{name}.test.run.gz", tag=name)
    return runs


def test_seeds_of_one_model_against_another(store_url, seed_runs):
    app = open_page(COMPARE)
    app.radio(key="view").set_value("Whole split").run()
    app.radio(key="runs_source").set_value("Seed runs").run()
    groups = app.multiselect(key="seed_groups")
    assert groups.options == ["alpha · run files (2: seed 1, seed 2)", "beta · run files (1: seed 7)"]
    assert app.button(key="compare_seeds").disabled
    groups.set_value(["alpha · run files", "beta · run files"]).run()
    compare_on_split(app, "compare_seeds")
    qrels = qrels_from_questions(TEST_SPLIT)
    alpha = [evaluate(seed_runs[name], qrels).aggregate["map"] for name in ("alpha.seed1", "alpha.seed2")]
    means = app.dataframe[0].value
    assert means.loc["alpha · run files", "map"] == pytest.approx(sum(alpha) / 2)  # averaged over seeds
    assert means.loc["beta · run files", "map"] == pytest.approx(1.0)
    (pair,) = app.dataframe[1].value.itertuples()
    assert (pair.vs, pair.model, pair.wins) == ("alpha · run files", "beta · run files", 28)
    assert any("averaged over its runs" in c.value for c in app.caption)
    assert not [c for c in app.checkbox if c.key == "different_top1"]  # seeds have no single top-1
    assert not [b for b in app.button if b.key == "fuse"]  # seed groups are runs, not models to fuse


def test_seed_runs_say_where_they_come_from_when_there_are_none(store_url, tmp_path, monkeypatch):
    monkeypatch.setenv("RERANK_LAB_SEED_RUNS", str(tmp_path / "nothing"))
    app = open_page(COMPARE)
    app.radio(key="view").set_value("Whole split").run()
    app.radio(key="runs_source").set_value("Seed runs").run()
    assert not app.exception, app.exception
    assert any("python -m qa_core evaluate" in info.value for info in app.info)
