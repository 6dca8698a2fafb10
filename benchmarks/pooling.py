"""Depth-k pooling against random judging on WikiQA TEST, with a simulated annotator.

How many judgements does the Label queue's ``pool`` order need before three systems are ranked by
MAP as full judgements rank them, and every pairwise significance verdict is the one full
judgements give? And does the same number of judgements chosen at random get there?

The simulated annotator is the learning-loop benchmark's: it judges the pairs in the queue's order
and gives each the gold grade (``benchmarks/learning_loop.py``; here nothing is retrained, so no
store is needed: the order is ``qa_core.services.labeling.strategies.order_candidates``, the code
path of the Label page, and the judgements are read back in that order). The systems are runs kept
by ``benchmarks/rankers.py`` (nothing is retrained). The rule below was fixed and committed before
the first run (``RULE``).

    nice -n 10 .venv/bin/python benchmarks/pooling.py
    .venv/bin/python benchmarks/pooling.py --render   # re-render from the stored results
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Any, NamedTuple

import numpy as np
from common import ROOT, machine, machine_line, measure_or_render
from scipy.stats import kendalltau

from qa_core import config
from qa_core.data.importers import load_wikiqa
from qa_core.evaluation import evaluate
from qa_core.services.labeling.strategies import order_candidates
from qa_core.services.stored_runs import read_run
from qa_core.significance import randomisation_test

RESULT = "pooling"
RUNS = ROOT / "benchmarks" / "results" / "runs" / "wikiqa"
SYSTEMS = {"bm25": "bm25.test.run.gz", "smcnn": "smcnn.seed1.test.run.gz",
           "compare_aggregate": "compare_aggregate.seed1.test.run.gz"}
DEPTHS = (1, 3, 5, 10)
RANDOM_SEEDS = tuple(range(1, 6))
STEP = 50  # judgements between two checks of the ranking
ALPHA = 0.05
RULE = (
    "Rule (fixed before the run). Systems: BM25, SM-CNN seed 1 and compare-aggregate seed 1, the TEST runs "
    "`benchmarks/rankers.py` kept (a lexical baseline, a CNN and an attention model). Questions: WikiQA TEST's "
    "243 questions (raw setting), fixed; under incomplete judgements an unjudged candidate counts as not "
    "relevant and a question without a judged relevant one scores AP 0 (trec_eval's rule, the standard "
    "numbers). Reference: MAP and the verdicts under every gold judgement. A verdict for a pair of systems is "
    "'A better', 'B better' or 'no significant difference' by the paired randomisation test on per-question AP "
    "(10,000 seeded permutations, two-sided, p < 0.05; `qa_core.significance`). Agreement after n judgements: "
    "Kendall's tau between the systems' MAP under those n judgements and under full judgements is 1 (the same "
    "order) and all three verdicts are the reference's. Orders: the Label queue's `pool` order at depth k "
    "(1, 3, 5, 10) over the three systems (unjudged first, spread across questions, best rank first; nothing "
    "judged before), and seeded random orders of all TEST pairs (seeds 1-5). Judgements needed: the smallest "
    f"n, checked every {STEP} judgements and at the end of the order, from which agreement holds at every later "
    "check; 'not reached' when the whole pool does not agree. Reported per k: the pool's size, tau and verdicts "
    "kept with the whole pool, judgements needed; for random at the same number of judgements as each pool: "
    "tau (mean ± std over seeds) and the seeds in agreement (checked at exactly that number); and random's own judgements needed (mean ± std). "
    "Pooling is called cheaper than random at depth k only if its pool agrees and random agrees on fewer than "
    "half the seeds at that pool's size."
)


class Pair(NamedTuple):
    """A TEST pair as a queue order reads it."""

    candidate_id: int
    qid: str
    doc_id: str


def verdict(a: np.ndarray, b: np.ndarray) -> int:
    """+1 when system a is significantly better, -1 when b is, 0 when neither."""
    p = randomisation_test(a, b).p_value
    return 0 if p is None or p >= ALPHA else int(np.sign(a.mean() - b.mean()))


def judged_state(runs: dict[str, dict[str, dict[str, float]]], qrels: dict[str, dict[str, int]],
                 reference: list[float] | None = None) -> tuple[list[float], list[int] | None]:
    """The systems' MAP and the pairwise verdicts (in ``itertools.combinations`` order) under
    ``qrels``. Given the reference MAPs, the verdicts (half a second each) are computed only where
    the order is the reference's: elsewhere there is no agreement whatever they say."""
    per_query = {name: evaluate(run, qrels).per_query["map"].to_numpy() for name, run in runs.items()}
    names = list(runs)
    maps = [float(per_query[name].mean()) for name in names]
    if reference is not None and kendalltau(maps, reference).statistic < 1.0:
        return maps, None
    return maps, [verdict(per_query[a], per_query[b]) for a, b in itertools.combinations(names, 2)]


def walk(order: list[int], pairs: dict[int, Pair], gold: dict[int, int], qids: list[str],
         runs: dict[str, dict[str, dict[str, float]]], reference: tuple[list[float], list[int]],
         also: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """The ranking checked every ``STEP`` judgements of ``order``, at its end and after ``also``."""
    checks = sorted({*range(STEP, len(order), STEP), len(order), *also})
    points = []
    for n in checks:
        qrels: dict[str, dict[str, int]] = {qid: {} for qid in qids}
        for candidate_id in order[:n]:
            qrels[pairs[candidate_id].qid][pairs[candidate_id].doc_id] = gold[candidate_id]
        maps, verdicts = judged_state(runs, qrels, reference[0] if n < len(order) else None)
        tau = float(kendalltau(maps, reference[0]).statistic)
        kept = None if verdicts is None else sum(v == r for v, r in zip(verdicts, reference[1]))
        points.append({"judgements": n, "tau": tau, "verdicts_kept": kept, "maps": maps})
    return points


def agrees(point: dict[str, Any]) -> bool:
    return point["tau"] == 1.0 and point["verdicts_kept"] == 3


def needed(points: list[dict[str, Any]]) -> int | None:
    """The smallest n from which every later check agrees (see ``RULE``)."""
    result = None
    for point in reversed(points):
        if not agrees(point):
            break
        result = point["judgements"]
    return result


def measure() -> dict[str, Any]:
    started = time.perf_counter()
    # Ids and gold labels only: the texts (and their case restoring) are not read.
    questions = load_wikiqa(config.shared_data_dir() / "wikiqa", restore_case=False).split("test")
    pairs: dict[int, Pair] = {}
    gold: dict[int, int] = {}
    for question in questions:
        for candidate in question.candidates:
            pairs[len(pairs)] = Pair(len(pairs), question.qid, candidate.doc_id)
            gold[len(gold)] = int(candidate.label or 0)
    qids = [q.qid for q in questions]
    full = {qid: {} for qid in qids}
    for candidate_id, pair in pairs.items():
        full[pair.qid][pair.doc_id] = gold[candidate_id]
    runs = {name: read_run(RUNS / path) for name, path in SYSTEMS.items()}
    missing = {name: sum(p.doc_id not in run.get(p.qid, {}) for p in pairs.values()) for name, run in runs.items()}
    reference = judged_state(runs, full)
    by_id = {pair.qid + "\x00" + pair.doc_id: pair.candidate_id for pair in pairs.values()}
    scores = {name: {by_id[qid + "\x00" + doc]: score for qid, docs in run.items() for doc, score in docs.items()
                     if qid + "\x00" + doc in by_id} for name, run in runs.items()}
    records = list(pairs.values())
    pools = {}
    for depth in DEPTHS:
        order = order_candidates("pool", records, scores=scores, depth=depth, seed=1)
        pools[str(depth)] = {"size": len(order), "points": walk(order, pairs, gold, qids, runs, reference)}
    randoms = {}
    for seed in RANDOM_SEEDS:
        order = order_candidates("random", records, seed=seed)
        sizes = tuple(pool["size"] for pool in pools.values())
        randoms[str(seed)] = walk(order, pairs, gold, qids, runs, reference, also=sizes)
    return {
        "machine": machine(), "rule": RULE, "systems": SYSTEMS, "names": list(SYSTEMS), "questions": len(qids), "pairs": len(pairs),
        "unscored_pairs": missing, "reference": {"maps": reference[0], "verdicts": reference[1]},
        "pools": pools, "random": randoms, "seconds": time.perf_counter() - started,
    }


def at(points: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """The check after ``n`` judgements."""
    return next(p for p in points if p["judgements"] == n)


def _mean_std(values: list[float], digits: int = 2) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):,.{digits}f} ± {spread:,.{digits}f}"


def render(result: dict[str, Any]) -> list[str]:
    names = result["names"]  # the order of the MAPs and verdicts (the file sorts "systems" by name)
    pairs = [f"{a} vs {b}" for a, b in itertools.combinations(names, 2)]
    words = {1: "first better", -1: "second better", 0: "no significant difference"}
    reference = result["reference"]
    lines = [
        "## Pooling: how many judgements a system comparison needs (simulated annotator, WikiQA TEST)",
        "",
        "Script: `benchmarks/pooling.py` (the Label queue's `pool` order, `qa_core/services/labeling/strategies.py`; "
        "the simulated annotator gives each pair its gold grade in queue order, as in the learning-loop benchmark; "
        "nothing retrained: the kept TEST runs). " + result["rule"],
        "",
        f"Full judgements ({result['questions']} questions, {result['pairs']:,} pairs): MAP "
        + ", ".join(f"{name} {value:.4f}" for name, value in zip(names, reference["maps"]))
        + "; verdicts " + "; ".join(f"{pair}: {words[v]}" for pair, v in zip(pairs, reference["verdicts"])) + ".",
        "",
        "| depth k | pool size (judgements) | tau with the whole pool | verdicts kept (of 3) | judgements needed | "
        "random at the pool's size: tau | random: seeds in agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    randoms = list(result["random"].values())
    for depth, pool in by_depth(result):
        last = pool["points"][-1]
        at_size = [at(points, pool["size"]) for points in randoms]
        agreeing = sum(agrees(p) for p in at_size)
        need = needed(pool["points"])
        lines.append(
            f"| {depth} | {pool['size']:,} | {last['tau']:.2f} | {last['verdicts_kept']} | "
            f"{'not reached' if need is None else f'{need:,}'} | {_mean_std([p['tau'] for p in at_size])} | "
            f"{agreeing} of {len(randoms)} |"
        )
    random_needed = [needed(points) for points in randoms]
    reached = [n for n in random_needed if n is not None]
    checks = [point for pool in result["pools"].values() for point in pool["points"]]
    checks += [point for points in randoms for point in points]
    lines += [
        "",
        f"Kendall's tau was 1 at {sum(p['tau'] == 1.0 for p in checks)} of {len(checks)} checks (all orders' checks "
        "together): with these three systems' MAPs 6-9 points apart, a few judgements order them; what needs "
        "judgements is the significance verdicts.",
        "",
        f"Random order, judgements needed: {_mean_std([float(n) for n in reached], 0) if reached else '-'} "
        f"({len(reached)} of {len(randoms)} seeds reach agreement before all {result['pairs']:,} pairs are judged).",
        "",
        reading_line(result, random_needed),
        "",
        verdict_line(result),
        "",
        f"Machine: {machine_line(result['machine'])}; {result['seconds']:.0f} s.",
        "",
    ]
    return lines


def by_depth(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The pools by depth (the result file sorts its keys as text)."""
    return sorted(result["pools"].items(), key=lambda item: int(item[0]))


def reading_line(result: dict[str, Any], random_needed: list[int | None]) -> str:
    """Judgements needed in queue order against random order, beside the rule's verdict (which
    compares at the pool's size)."""
    pooled = ", ".join(f"depth {depth} {needed(pool['points']) or 'not reached'}" for depth, pool in by_depth(result))
    reached = [float(n) for n in random_needed if n is not None]
    early = [depth for depth, pool in by_depth(result) if (needed(pool["points"]) or pool["size"]) < pool["size"]]
    note = (f" At depth {', '.join(early)} the pool order agrees before its pool is judged whole: its first pairs are "
            "every question's best-ranked ones." if early else "")
    return (f"Read in queue order (judgements needed, the rule's own count): {pooled}; random order "
            f"{_mean_std(reached, 0) if reached else 'not reached'}.{note}")


def verdict_line(result: dict[str, Any]) -> str:
    """The rule's conclusion per depth."""
    randoms = list(result["random"].values())
    parts = []
    for depth, pool in by_depth(result):
        last = pool["points"][-1]
        if not agrees(last):
            parts.append(f"depth {depth}: the pool does not agree")
            continue
        agreeing = sum(agrees(at(r, pool["size"])) for r in randoms)
        cheaper = agreeing < len(randoms) / 2
        parts.append(f"depth {depth}: the pool agrees; random at the same cost in {agreeing} of {len(randoms)} seeds"
                     + (" (pooling is cheaper)" if cheaper else " (not cheaper by the rule)"))
    return "By the rule: " + "; ".join(parts) + "."


if __name__ == "__main__":
    measure_or_render(RESULT, __doc__ or "", measure, render, machine_footer=False)
