"""Evaluation with holes: judged@10 and the measures for incomplete judgements (bpref, condensed-list
MAP and nDCG@10) from ``qa_core.evaluation.judgements`` against an independent computation here,
on hand-made runs with unjudged candidates and ties; then Compare's and Errors' services, the CLI's
``evaluate``/``compare`` and the Compare page (AppTest) on a dataset with unjudged candidates, and
on a fully judged one, where nothing is added."""

from __future__ import annotations

import dataclasses
import json
import math
import random

import pandas as pd
import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.data.exporters import write_trec_run
from qa_core.evaluation import (
    JUDGED_FLAG,
    evaluate,
    judgements,
    qrels_from_questions,
)
from qa_core.services import compare, errors
from qa_core.types import Dataset
from tests.cli import run_cli
from tests.pages import COMPARE, open_page

HOLES = "holes"


# ------------------------------------------------------------ an independent computation


def trec_order(scores: dict[str, float]) -> list[str]:
    """trec_eval's order, written out: score descending, ties by docno descending."""
    return [doc for doc, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def judged_at(order: list[str], grades: dict[str, int], k: int = 10) -> float:
    top = order[:k]
    return sum(doc in grades for doc in top) / len(top)


def bpref(order: list[str], grades: dict[str, int]) -> float:
    """trec_eval's bpref (m_bpref.c): unjudged candidates skipped; each relevant one loses the share
    of judged non-relevant ones above it, at most R of them, over min(R, N)."""
    relevant = sum(g > 0 for g in grades.values())
    nonrelevant = sum(g <= 0 for g in grades.values())
    if not relevant:
        return 0.0
    total, above = 0.0, 0
    for doc in order:
        if doc not in grades:
            continue
        if grades[doc] > 0:
            total += 1.0 - min(above, relevant) / min(relevant, nonrelevant) if above else 1.0
        else:
            above += 1
    return total / relevant


def condensed_ap(order: list[str], grades: dict[str, int]) -> float:
    kept = [doc for doc in order if doc in grades]
    relevant = sum(g > 0 for g in grades.values())
    hits, total = 0, 0.0
    for rank, doc in enumerate(kept, start=1):
        if grades[doc] > 0:
            hits += 1
            total += hits / rank
    return total / relevant if relevant else 0.0


def condensed_ndcg10(order: list[str], grades: dict[str, int]) -> float:
    kept = [doc for doc in order if doc in grades][:10]
    dcg = sum(grades[doc] / math.log2(rank + 1) for rank, doc in enumerate(kept, start=1))
    ideal = sorted(grades.values(), reverse=True)[:10]
    idcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal, start=1))
    return dcg / idcg if idcg else 0.0


def runs_with_holes(seed: int) -> tuple[dict, dict]:
    """40 questions, pools of 3..16 scored from few values (ties), grades 0..2, about a third unjudged;
    one question left out of the run (it scores 0)."""
    rng = random.Random(seed)
    run, qrels = {}, {}
    for q in range(40):
        docs = [f"d{i:02d}" for i in range(rng.randint(3, 16))]
        run[f"q{q}"] = {doc: float(rng.randint(0, 5)) for doc in docs}
        judged = [doc for doc in docs if rng.random() < 0.65] or docs[:1]
        qrels[f"q{q}"] = {doc: rng.choice((0, 0, 1, 2)) for doc in judged}
    del run["q7"]
    return run, qrels


@pytest.mark.parametrize("clean", [False, True])
def test_judged_at_10_and_the_incomplete_measures_match_an_independent_computation(clean):
    run, qrels = runs_with_holes(seed=3)
    report = judgements(run, qrels, clean=clean)
    qids = [q for q, g in qrels.items() if not clean or (any(v > 0 for v in g.values()) and any(v <= 0 for v in g.values()))]
    expected = {"judged": [], "bpref": [], "condensed map": [], "condensed ndcg@10": []}
    for qid in qids:
        if qid not in run:  # trec_eval -c: a question the run leaves out scores 0
            for values in expected.values():
                values.append(0.0)
            continue
        order, grades = trec_order(run[qid]), qrels[qid]
        expected["judged"].append(judged_at(order, grades))
        expected["bpref"].append(bpref(order, grades))
        expected["condensed map"].append(condensed_ap(order, grades))
        expected["condensed ndcg@10"].append(condensed_ndcg10(order, grades))
    mean = {name: sum(values) / len(values) for name, values in expected.items()}
    assert report.questions == len(qids)
    assert report.judged == pytest.approx(mean.pop("judged"), abs=1e-12)
    assert report.values == pytest.approx(mean, abs=1e-12)
    assert report.unjudged == sum(doc not in qrels[q] for q in qids if q in run for doc in run[q]) > 0
    assert report.questions_with_unjudged == sum(any(doc not in qrels[q] for doc in run[q]) for q in qids if q in run)
    # The standard numbers count the unjudged as not relevant; condensed MAP does not: it is higher here.
    assert report.values["condensed map"] > evaluate(run, qrels, clean).aggregate["map"]


def test_judged_at_10_breaks_ties_by_the_one_rule():
    """Eleven candidates tied at rank 10: trec_eval's order (doc id descending) puts the judged "k"
    there, ir-measures' own judged@k (doc id ascending) the unjudged "j"."""
    scores = {f"{c}": float(20 - i) for i, c in enumerate("abcdefghi")} | {"j": 1.0, "k": 1.0}
    grades = {doc: 0 for doc in "abcdefghik"} | {"a": 1}
    report = judgements({"q": scores}, {"q": grades})
    assert report.judged == 1.0 and report.unjudged == 1 and not report.flagged
    assert "All judged" not in report.describe()


def test_a_fully_judged_run_says_so_and_nothing_else():
    demo = load_demo().split("test")
    qrels = qrels_from_questions(demo)
    run = {q.qid: {c.doc_id: -i for i, c in enumerate(q.candidates)} for q in demo}
    report = judgements(run, qrels)
    assert report.complete and report.judged == 1.0 and not report.flagged
    assert report.describe() == "All judged: every candidate ranked has a judgement."


def test_flag_under_80_percent_judged():
    run = {"q": {f"d{i}": float(i) for i in range(10)}}
    below = judgements(run, {"q": {f"d{i}": int(i == 9) for i in range(3, 10)}})  # 7 of the top 10
    at = judgements(run, {"q": {f"d{i}": int(i == 9) for i in range(2, 10)}})  # 8 of the top 10
    assert below.judged == pytest.approx(0.7) and below.flagged and "⚠" in below.describe()
    assert at.judged == pytest.approx(JUDGED_FLAG) and not at.flagged and "⚠" not in at.describe()


# ------------------------------------------------------------ a dataset with unjudged candidates


def with_holes() -> Dataset:
    """The demo corpus named ``holes`` whose TEST questions keep only their correct candidates' and
    their first candidate's labels: about a third of each pool is judged."""
    demo = load_demo()
    questions = [
        dataclasses.replace(question, candidates=[
            dataclasses.replace(c, label=c.label if question.split != "test" or i == 0 or c.label else None)
            for i, c in enumerate(question.candidates)
        ])
        for question in demo.questions
    ]
    return Dataset(HOLES, questions, demo.source)


def oracle_and_reverse(questions) -> dict[str, dict]:
    """Two runs over ``questions``' pools without ties: in pool order, and reversed."""
    return {
        "forward": {q.qid: {c.doc_id: float(-i) for i, c in enumerate(q.candidates)} for q in questions},
        "reverse": {q.qid: {c.doc_id: float(i) for i, c in enumerate(q.candidates)} for q in questions},
    }


def test_compare_and_errors_give_each_system_its_judgements_beside_the_standard_means():
    test = with_holes().split("test")
    runs = oracle_and_reverse(test)
    result = compare.compare_runs(runs, test)
    assert result.has_unjudged and list(result.judgements) == ["forward", "reverse"]
    means = compare.means_table(result)
    assert list(means.columns)[:4] == ["MAP", "MRR", "P@1", "nDCG@10"]  # the standard numbers stay first, named
    assert {"judged@10", "bpref", "condensed MAP", "condensed nDCG@10"} <= set(means.columns)
    assert means["judged@10"].str.contains("⚠").all()  # about a third judged
    lines = result.judgement_lines()
    assert len(lines) == 2 and lines[0].startswith("Judgements, forward: judged@10 0.")
    assert "count them as not relevant" in lines[0] and "condensed MAP" in lines[0]

    full = load_demo().split("test")
    complete = compare.compare_runs(oracle_and_reverse(full), full)
    assert not complete.has_unjudged and complete.judgement_lines() == []
    assert list(compare.means_table(complete).columns) == ["MAP", "MRR", "P@1", "nDCG@10"]

    seeds = compare.compare_seed_runs({"a": [runs["forward"]] * 2, "b": [runs["reverse"]]}, test)
    assert seeds.judgements["a"].judged == pytest.approx(result.judgements["forward"].judged)

    qrels = qrels_from_questions(test)
    profiles = pd.DataFrame({"question": [q.text for q in test], "split": "test", "class": "none", "words": 5,
                             "length": "1-5 words"}, index=pd.Index([q.qid for q in test], name="qid"))  # no parse needed
    table = errors.error_table(runs["forward"], qrels, profiles, {}, {}, clean=False)
    assert table["unjudged"].sum() == result.judgements["forward"].unjudged > 0
    assert errors.judgement_report(runs["forward"], qrels, profiles, clean=False) == result.judgements["forward"]


def test_cli_evaluate_and_compare_name_the_judgements_where_candidates_are_unjudged(cli_env, capsys):
    store = Store()
    store.datasets.import_dataset(with_holes())
    store.datasets.import_dataset(load_demo())
    store.close()
    forward = cli_env / "forward.run"  # the same qids and doc ids in both datasets
    write_trec_run(oracle_and_reverse(load_demo().split("test"))["forward"], forward, tag="forward")
    code, out, err = run_cli("evaluate", "--model", "bm25", "--data", HOLES, "--split", "test", capsys=capsys)
    assert code == 0, err
    line = json.loads(out)
    judged = line["judgements"]
    assert judged["flagged"] and judged["judged@10"] < JUDGED_FLAG and judged["unjudged"] > 0
    assert {"bpref", "condensed map", "condensed ndcg@10"} <= judged.keys() and 0 <= line["map"] <= 1

    code, out, err = run_cli("compare", str(forward), "bm25", "--data", HOLES, "--split", "test", capsys=capsys)
    assert code == 0, err
    lines = [row for row in out.splitlines() if row.startswith("judgements in ")]
    assert [row.split(":")[0] for row in lines] == [f"judgements in {forward}", "judgements in bm25"]
    assert all("⚠ under 80% judged" in row and "bpref" in row for row in lines)

    code, out, err = run_cli("compare", str(forward), "bm25", "--data", HOLES, "--split", "test", "--format", "json",
                             capsys=capsys)
    assert json.loads(out)["judgements"]["bm25"]["flagged"] is True

    # Every candidate judged: nothing added.
    code, out, _ = run_cli("evaluate", "--model", "bm25", "--data", "demo", "--split", "test", capsys=capsys)
    assert code == 0 and "judgements" not in json.loads(out)
    code, out, _ = run_cli("compare", str(forward), "bm25", "--data", "demo", "--split", "test", capsys=capsys)
    assert code == 0 and "judgements in" not in out


def test_compare_page_flags_systems_whose_top_10_is_under_80_percent_judged(store_url):
    Store(store_url).datasets.import_dataset(with_holes())
    app = open_page(COMPARE)
    app.selectbox(key="dataset").select(HOLES).run()
    app.multiselect(key="models").set_value(["bm25", "overlap"]).run()
    app.radio(key="view").set_value("Whole split").run()
    app.button(key="compare_split").click().run()
    assert not app.exception, app.exception
    means = app.table[0].value
    assert list(means.columns)[:4] == ["MAP", "MRR", "P@1", "nDCG@10"]
    assert means["judged@10"].str.contains("⚠ under 80% judged").all() and "bpref" in means
    captions = [c.value.replace("\u2060", "") for c in app.caption]
    assert any(c.startswith("Judgements, bm25: judged@10") and "condensed MAP" in c for c in captions)
