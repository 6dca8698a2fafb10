"""The one tie rule (qa_core.ordering) against ir-measures (trec_eval) and ranx, run files written
and read back, and the tie-aware values of qa_core.evaluation.tie_aware."""

from __future__ import annotations

import itertools
import random

import ir_measures
import numpy as np
import pytest
import ranx

from qa_core import ordering
from qa_core.data.exporters import write_trec_run
from qa_core.data.importers import read_trec_run
from qa_core.evaluation import MEASURES, METRICS, evaluate, tie_aware, tie_groups
from qa_core.rankers.base import Explanation, Ranker, as_candidates
from qa_core.retrieval import BM25Index
from qa_core.types import Candidate, Question

RANX_METRICS = {"map": "map", "mrr": "mrr", "p@1": "precision@1", "ndcg@10": "ndcg@10"}


def tied_runs(seed: int, questions: int = 12, pool: int = 25) -> tuple[dict, dict]:
    """Runs where most scores tie (three score values), graded qrels."""
    rng = random.Random(seed)
    run, qrels = {}, {}
    for q in range(questions):
        # one id width: ranx (numba) compiles its metrics once per width, about 10 s each
        docs = [f"{rng.randrange(10 ** 6):06d}{i:04d}" for i in range(pool)]
        run[f"q{q}"] = {doc: rng.choice([0.0, 0.0, 0.0, 1.5, 2.25]) for doc in docs}
        qrels[f"q{q}"] = {doc: rng.choice([0, 0, 0, 1, 2]) for doc in docs}
        qrels[f"q{q}"][docs[0]] = 1
    return run, qrels


def ir_measures_means(run: dict, qrels: dict) -> dict[str, float]:
    values = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, run)
    return {name: values[measure] for name, measure in MEASURES.items()}


def ranx_means(run: dict | ranx.Run, qrels: dict) -> dict[str, float]:
    values = ranx.evaluate(ranx.Qrels(qrels), run if isinstance(run, ranx.Run) else ranx.Run(run),
                           list(RANX_METRICS.values()))
    return {name: values[ranx_name] for name, ranx_name in RANX_METRICS.items()}


def test_the_rule_is_trec_evals_order():
    scores = {"a": 1.0, "b": 2.0, "c": 1.0, "d10": 1.0, "d9": 1.0}
    assert [doc for doc, _ in ordering.ranked(scores)] == ["b", "d9", "d10", "c", "a"]
    docs = list(scores)
    assert [docs[i] for i in ordering.order(docs, list(scores.values()))] == ["b", "d9", "d10", "c", "a"]
    # what pytrec_eval evaluates: only the rule's order gives its AP
    qrels = {"q": {"a": 1}}
    assert evaluate({"q": scores}, qrels).aggregate["map"] == pytest.approx(1 / 5)
    assert ordering.tied_count(list(scores.values())) == 4


@pytest.mark.parametrize("seed", [1, 2])
def test_project_ir_measures_and_ranx_agree_on_runs_full_of_ties(seed, tmp_path):
    run, qrels = tied_runs(seed)
    ours = evaluate(run, qrels).aggregate
    assert ours == pytest.approx(ir_measures_means(run, qrels), abs=1e-12)
    # ranx alone orders ties in no set way; given the rule in the scores it agrees
    assert ranx_means({q: ordering.strict(s) for q, s in run.items()}, qrels) == pytest.approx(ours, abs=1e-12)
    # the run file the project writes, read back by the project, by ir-measures (trec_eval) and ranx
    path = tmp_path / "ties.run"
    write_trec_run(run, path, tag="t")
    back = read_trec_run(path)
    assert {q: {doc: score for doc, _, score in docs} for q, docs in back.items()} == run
    lines = [line.split() for line in path.read_text().splitlines()]
    assert {(q, doc): int(rank) for q, _, doc, rank, _, _ in lines} == {
        (q, doc): position for q, docs in back.items() for doc, position, _ in docs}
    assert evaluate({q: {doc: s for doc, _, s in docs} for q, docs in back.items()}, qrels).aggregate == ours
    assert ir_measures_means(list(ir_measures.read_trec_run(str(path))), qrels) == pytest.approx(ours, abs=1e-12)
    by_rank = {q: {doc: -float(rank) for qq, _, doc, rank, _, _ in lines if qq == q} for q in run}
    assert ranx_means(by_rank, qrels) == pytest.approx(ours, abs=1e-12)  # a reader of the rank column
    file_run = ranx.Run.from_file(str(path), kind="trec")
    strict_file = {q: ordering.strict(docs) for q, docs in file_run.to_dict().items()}
    assert ranx_means(strict_file, qrels) == pytest.approx(ours, abs=1e-12)


def brute_force(run: dict, qrels: dict) -> tuple[dict, dict, dict]:
    """Mean, min and max of ir-measures' metrics over every order of every tie group (small runs)."""
    per_query = {}
    for qid, scores in run.items():
        groups: dict[float, list[str]] = {}
        for doc, score in scores.items():
            groups.setdefault(score, []).append(doc)
        levels = sorted(groups, reverse=True)
        values = []
        for orders in itertools.product(*(itertools.permutations(groups[s]) for s in levels)):
            ranked = [doc for group in orders for doc in group]
            strict = {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}
            values.append(evaluate({qid: strict}, {qid: qrels[qid]}).aggregate)
        per_query[qid] = {m: [v[m] for v in values] for m in METRICS}
    mean = {m: float(np.mean([np.mean(v[m]) for v in per_query.values()])) for m in METRICS}
    low = {m: float(np.mean([min(v[m]) for v in per_query.values()])) for m in METRICS}
    high = {m: float(np.mean([max(v[m]) for v in per_query.values()])) for m in METRICS}
    return mean, low, high


def test_tie_aware_values_are_the_mean_and_range_over_all_orders():
    rng = random.Random(7)
    run, qrels = {}, {}
    for q in range(8):
        docs = [f"d{i}" for i in range(7)]
        run[f"q{q}"] = {doc: rng.choice([0.0, 0.0, 1.0, 2.0]) for doc in docs}
        qrels[f"q{q}"] = {doc: rng.choice([0, 0, 1, 2]) for doc in docs} | {"unretrieved": q % 2}
    mean, low, high = brute_force(run, qrels)
    report = tie_aware(run, qrels)
    assert report.expected == pytest.approx(mean, abs=1e-12)
    assert report.worst == pytest.approx(low, abs=1e-12)
    assert report.best == pytest.approx(high, abs=1e-12)
    rule = evaluate(run, qrels).aggregate
    assert all(low[m] - 1e-12 <= rule[m] <= high[m] + 1e-12 for m in METRICS)
    flat = [s for scores in run.values() for s in scores.values()]
    assert report.candidates == len(flat)
    assert report.tied_candidates == sum(ordering.tied_count(list(s.values())) for s in run.values()) > 0


def test_without_ties_the_tie_aware_values_are_trec_evals():
    run, qrels = tied_runs(3)
    distinct = {q: {doc: float(i) for i, doc in enumerate(scores)} for q, scores in run.items()}
    report = tie_aware(distinct, qrels, clean=True)
    rule = evaluate(distinct, qrels, clean=True).aggregate
    assert report.tied_candidates == report.questions_with_ties == 0
    for values in (report.expected, report.worst, report.best):
        assert values == pytest.approx(rule, abs=1e-12)
    assert report.range_text("map") == f"{rule['map']:.4f}"


def test_tie_groups_follow_the_rule():
    assert tie_groups({"a": 1.0, "b": 1.0, "c": 2.0}, {"a": 1}) == [[0], [0, 1]]


def test_first_stage_ranks_ties_and_the_cut_off_by_the_rule():
    index = BM25Index.build([(f"s{i}", "paris is the capital") for i in range(6)] + [("t", "rome")])
    hits = index.search("capital of paris", k=4)
    assert [doc for doc, _ in hits] == ["s5", "s4", "s3", "s2"]


def test_rrf_ranks_tied_members_by_the_rule():
    from qa_core.fusion import Fusion, apply_fusion

    run, _ = tied_runs(4, questions=3, pool=30)
    fused = apply_fusion(Fusion("rrf", ("a", "b"), {"k": 60}), {"a": run, "b": run})
    for qid, scores in run.items():
        assert [doc for doc, _ in ordering.ranked(fused[qid])] == [doc for doc, _ in ordering.ranked(scores)]


def test_batch_scoring_reads_a_first_stage_run_by_scores_then_the_rule(tmp_path):
    from qa_core.services.batch_chunks import _pool, run_row

    texts = {"q": ("who?", {doc: (f"text {doc}", None) for doc in ("a", "b", "c", "d")})}
    # the rank column disagrees with the scores and leaves ties in ascending doc id order
    lines = ["q Q0 a 1 1.0 x", "q Q0 b 2 1.0 x", "q Q0 c 3 3.0 x", "q Q0 d 4 1.0 x"]
    rows = [run_row(tmp_path / "r.run", n, 0, 0, line, texts) for n, line in enumerate(lines, start=1)]
    ranks = {c.doc_id: c.first_stage_rank for c in _pool(rows)}
    assert ranks == {"c": 1, "d": 2, "b": 3, "a": 4}


class _LengthRanker(Ranker):
    """Scores a candidate by its word count: ties on demand, no model to load."""

    name = ""  # not registered

    def score_pools(self, pools):
        return [np.array([float(len(c.text.split())) for c in as_candidates(cands)]) for _, cands in pools]

    def explain(self, question, candidates, index):
        text = as_candidates(candidates)[index].text
        return Explanation(float(len(text.split())), question.split(), text.split(), [1.0] * len(text.split()))


def test_ask_ranks_and_counterfactual_ranks_follow_the_rule():
    from qa_core.services.ranking import rank_pool

    pool = [Candidate("d1", "one two"), Candidate("d3", "one two"), Candidate("d2", "one two three")]
    result = rank_pool(_LengthRanker(), "which?", pool)
    assert [s.candidate.doc_id for s in result.scored] == ["d2", "d3", "d1"]
    assert list(result.table()["tied"]) == [False, True, True] and result.tied() == 2
    # d1 edited to three words ties d2's score: doc id descending puts it after d2
    assert result.counterfactual(3, "four five six").rank == 2


def test_the_label_pages_suggestion_ranks_a_tie_as_ask_does():
    from qa_core.services.labeling import suggestions
    from qa_core.services.ranking import rank_pool

    pool = [Candidate("d1", "one two three"), Candidate("d3", "one two three"), Candidate("d2", "one")]
    asked = {s.candidate.doc_id: s.rank for s in rank_pool(_LengthRanker(), "which?", pool).scored}
    question = Question("q", "which?", pool)
    hints = {doc: suggestions.suggest(_LengthRanker(), "length", question, doc) for doc in asked}
    assert {doc: hint.rank for doc, hint in hints.items()} == asked == {"d3": 1, "d1": 2, "d2": 3}


def test_the_cli_reports_ties_beside_trec_evals_values(cli_env, capsys):
    import json

    from tests.cli import run_cli

    assert run_cli("data", "demo", capsys=capsys)[0] == 0
    code, out, _ = run_cli("evaluate", "--model", "bm25", "--data", "demo", "--split", "test", capsys=capsys)
    line = json.loads(out)
    assert code == 0 and 0 < line["tied_candidates"] < line["candidates"] and line["questions_with_ties"] > 0
    ties = line["tie_aware"]
    assert all(ties["worst"][m] <= ties["expected"][m] <= ties["best"][m] for m in METRICS)
    assert ties["worst"]["map"] <= line["map"] <= ties["best"]["map"]
