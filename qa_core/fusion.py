"""Score-level fusion of rankers' runs through ranx: weighted sums of normalised scores, RRF and
CombMNZ, with members and parameters chosen on DEV only.

Runs are ``{qid: {doc_id: score}}`` (ir-measures' dict form). Scores of different models live on
different scales (a CNN's logit, BM25's sum of IDFs, an SVM margin), so a weighted sum normalises each
run per question first: z-scores (ranx's "zmuv": minus the mean, over the population std) or
min-max. ranx does the arithmetic (``ranx.fuse``) and the DEV grid searches (``ranx.optimize_fusion``:
weights in steps of 0.1 summing to 1, RRF's k from 10 to 100); what stays here is checking that the
members score the same pools, converting runs, and ``select_members``, the benchmark ensemble's
DEV-only choice of members (ranx has no member selection).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from qa_core import ordering
from qa_core.evaluation import Qrels, Run, evaluate
from qa_core.types import InputError

if TYPE_CHECKING:  # ranx takes seconds to import: imported where used
    import ranx

# name -> (ranx normalisation, ranx method): the fusions the Compare page offers
METHODS = {
    "rrf": (None, "rrf"),
    "combmnz": ("min-max", "mnz"),
    "wsum-minmax": ("min-max", "wsum"),
    "wsum-zscore": ("zmuv", "wsum"),
}
METHOD_LABELS = {
    "rrf": "RRF (k tuned on DEV)",
    # Every member scores every candidate of a pool, so CombMNZ ranks as CombSUM does here.
    "combmnz": "CombMNZ (min-max scores)",
    "wsum-minmax": "weighted sum, min-max scores (weights tuned on DEV)",
    "wsum-zscore": "weighted sum, z-scores (weights tuned on DEV)",
}
WEIGHT_STEP = 0.1  # ranx's grid for weighted sums
RANX_ID_WIDTH = 10  # the one width of the doc ids ranx is given (``_RanxIds``)


class _RanxIds:
    """Doc ids as ranx is given them: numbers of one fixed width, in the sorted order of the ids.

    ranx stores a run's doc ids as numpy strings as wide as its longest id, and numba compiles
    ranx's functions once per width (about a minute for a first fusion in a new environment), so
    every dataset whose ids had a new length compiled them all again. Numbering in sorted order
    keeps the order of the ids themselves."""

    def __init__(self, *tables: Mapping[str, Mapping[str, float]]) -> None:
        docs = sorted({doc for table in tables for pool in table.values() for doc in pool})
        self.to_ranx = {doc: f"{number:0{RANX_ID_WIDTH}d}" for number, doc in enumerate(docs)}
        self.from_ranx = {number: doc for doc, number in self.to_ranx.items()}

    def run(self, run: Run, name: str, by_rank: bool = False) -> ranx.Run:
        """``by_rank``: for a fusion of ranks (RRF), whose ranks ranx takes from its own sort, which
        orders ties in no set way: the tie rule goes into the scores (``ordering.strict``). Score
        fusions get the scores as they are (a nudged tie would change a pool's normalisation)."""
        from ranx import Run as RanxRun

        return RanxRun({qid: {self.to_ranx[doc]: score
                              for doc, score in (ordering.strict(docs) if by_rank else docs).items()}
                        for qid, docs in run.items() if docs}, name=name)  # fmt: skip

    def qrels(self, qrels: Qrels) -> ranx.Qrels:
        from ranx import Qrels as RanxQrels

        return RanxQrels({qid: {self.to_ranx[doc]: grade for doc, grade in grades.items()}
                          for qid, grades in qrels.items()})  # fmt: skip

    def back(self, run: ranx.Run, like: Run) -> dict[str, dict[str, float]]:
        """Plain dicts again, keeping ``like``'s questions without candidates (ranx drops them)."""
        fused = run.to_dict()
        return {qid: {self.from_ranx[doc]: float(score) for doc, score in fused.get(qid, {}).items()}
                for qid in like}  # fmt: skip


def _check_pools(runs: Mapping[str, Run]) -> None:
    names = list(runs)
    first = {qid: set(docs) for qid, docs in runs[names[0]].items()}
    for name in names[1:]:
        if {qid: set(docs) for qid, docs in runs[name].items()} != first:
            raise InputError(f"runs {names[0]!r} and {name!r} do not score the same question-candidate pairs")


def znorm(run: Run) -> dict[str, dict[str, float]]:
    """Each question's scores minus their mean, over their (population) std; a constant pool gets 0s
    (ranx's "zmuv")."""
    from ranx import normalize

    ids = _RanxIds(run)
    return ids.back(normalize(ids.run(run, "run"), "zmuv"), run)


def fuse(runs: Mapping[str, Run], weights: Mapping[str, float], norm: str = "zmuv") -> dict[str, dict[str, float]]:
    """Weighted sum of the members' normalised runs (ranx ``wsum``); every member must score the
    same pools."""
    from ranx import fuse as ranx_fuse
    from ranx import normalize

    members = [name for name, weight in weights.items() if weight]
    if not members:
        raise InputError("an ensemble needs at least one member with a non-zero weight")
    _check_pools({name: runs[name] for name in members})
    like = runs[members[0]]
    ids = _RanxIds(like)  # every member scores the same pools
    converted = [ids.run(runs[name], name) for name in members]
    if len(members) == 1:  # ranx.fuse wants two runs or more; one member is its normalised run, scaled
        single = ids.back(normalize(converted[0], norm), like)
        return {qid: {doc: weights[members[0]] * score for doc, score in docs.items()} for qid, docs in single.items()}
    fused = ranx_fuse(converted, norm=norm, method="wsum", params={"weights": [float(weights[n]) for n in members]})
    return ids.back(fused, like)


# ---------------------------------------------------------------------- fusions tuned on DEV


@dataclass(frozen=True)
class Fusion:
    """A fusion recipe: method (a ``METHODS`` key), members in order, parameters ranx chose on DEV."""

    method: str
    members: tuple[str, ...]
    params: dict = field(default_factory=dict)  # {"weights": [...]} or {"k": ...}; empty for CombMNZ
    dev_map: float | None = None  # the fused DEV run's MAP (trec_eval semantics)

    @property
    def tag(self) -> str:
        """The store tag of runs made with this recipe (the Compare page lists them by it)."""
        return f"fusion:{self.method}({'+'.join(self.members)})"


def _dev_questions(dev_runs: Mapping[str, Run], dev_qrels: Qrels) -> list[str]:
    """DEV questions ranx can tune on: judged, scored by every member, with a relevant candidate."""
    return [
        qid for qid, grades in dev_qrels.items()
        if any(grade > 0 for grade in grades.values()) and all(run.get(qid) for run in dev_runs.values())
    ]


def tune_fusion(method: str, dev_runs: Mapping[str, Run], dev_qrels: Qrels) -> Fusion:
    """Choose the method's parameters on DEV with ``ranx.optimize_fusion`` (by ranx's MAP; ties in the
    grid go to the later setting, as ranx does) and report the fused DEV run's MAP. ranx's MAP
    orders a fused run's tied scores its own way (rare after a weighted sum; RRF's inputs follow
    the tie rule); the reported ``dev_map`` is trec_eval's, in the rule's order."""
    from ranx import optimize_fusion

    if method not in METHODS:
        raise InputError(f"unknown fusion {method!r}; choose one of {', '.join(METHODS)}")
    members = tuple(dev_runs)
    if len(members) < 2:
        raise InputError("a fusion needs two or more models")
    _check_pools(dev_runs)
    qids = _dev_questions(dev_runs, dev_qrels)
    if not qids:
        raise InputError("no DEV question has a relevant candidate: there is nothing to tune the fusion on")
    norm, ranx_method = METHODS[method]
    params: dict = {}
    if ranx_method in ("wsum", "rrf"):
        dev = {qid: dev_qrels[qid] for qid in qids}
        ids = _RanxIds(dev, *dev_runs.values())
        runs = [ids.run({qid: dev_runs[name][qid] for qid in qids}, name, by_rank=ranx_method == "rrf")
                for name in members]
        qrels = ids.qrels(dev)
        extra = {"step": WEIGHT_STEP} if ranx_method == "wsum" else {}
        params = optimize_fusion(qrels, runs, norm=norm, method=ranx_method, metric="map", show_progress=False,
                                 **extra)
        # Plain numbers and lists (ranx returns numpy scalars): recipes go into JSON and checkpoints.
        params = {key: np.asarray(value).tolist() for key, value in params.items()}
    recipe = Fusion(method, members, params)
    dev_map = evaluate(apply_fusion(recipe, dev_runs), dev_qrels).aggregate["map"]
    return Fusion(method, members, params, dev_map)


def apply_fusion(recipe: Fusion, runs: Mapping[str, Run]) -> dict[str, dict[str, float]]:
    """The recipe's fusion of ``runs`` (member name -> run over the same pools)."""
    from ranx import fuse as ranx_fuse

    missing = [name for name in recipe.members if name not in runs]
    if missing:
        raise InputError(f"the fusion needs runs of {', '.join(missing)}")
    members = {name: runs[name] for name in recipe.members}
    _check_pools(members)
    norm, ranx_method = METHODS[recipe.method]
    like = members[recipe.members[0]]
    ids = _RanxIds(like)  # every member scores the same pools
    converted = [ids.run(run, name, by_rank=ranx_method == "rrf") for name, run in members.items()]
    fused = ranx_fuse(converted, norm=norm, method=ranx_method, params=dict(recipe.params))
    return ids.back(fused, like)


# ---------------------------------------------------------------------- the benchmark ensemble's members


def rank_members(dev_runs: Mapping[str, Run], dev_qrels: Qrels) -> list[str]:
    """Run names by DEV MAP, best first (ties by name, so the order is reproducible)."""
    scored = {name: evaluate(run, dev_qrels).aggregate["map"] for name, run in dev_runs.items()}
    return sorted(scored, key=lambda name: (-scored[name], name))


def _restrict(run: Run, qids: set[str]) -> dict[str, Mapping[str, float]]:
    return {qid: docs for qid, docs in run.items() if qid in qids}


def select_members(
    dev_runs: Mapping[str, Run], dev_qrels: Qrels, sizes: Sequence[int] = (1, 2, 3, 4, 5), repeats: int = 5
) -> tuple[dict[str, float], float]:
    """Equal weights on the k runs with the best DEV MAP, k chosen by repeated 2-fold
    cross-validation over DEV's questions (rank the runs on one half, score the top-k sum on the
    other; ties go to the smaller k). Returns the members' weights and their DEV MAP.

    Why not tuned weights: on WikiQA's 126 DEV questions, greedy forward selection with free weights
    fitted DEV noise. Cross-validated on DEV, it scored 0.7411 MAP against 0.7472 for the top 3 with
    equal weights (TrecQA: 0.8383 against 0.8459; docs/benchmarks.md).
    """
    if not dev_runs:
        raise InputError("no runs to build an ensemble from")
    qids = sorted(dev_qrels)
    sizes = sorted({size for size in sizes if 1 <= size <= len(dev_runs)}) or [1]
    totals = dict.fromkeys(sizes, 0.0)
    for repeat in range(repeats if len(qids) > 1 else 0):
        shuffled = random.Random(repeat).sample(qids, len(qids))
        for fit_half, check_half in ((shuffled[::2], shuffled[1::2]), (shuffled[1::2], shuffled[::2])):
            fit, check = set(fit_half), set(check_half)
            order = rank_members({name: _restrict(run, fit) for name, run in dev_runs.items()},
                                 _restrict(dev_qrels, fit))  # fmt: skip
            check_runs = {name: _restrict(run, check) for name, run in dev_runs.items()}
            for size in sizes:
                fused = fuse(check_runs, dict.fromkeys(order[:size], 1.0))
                totals[size] += evaluate(fused, _restrict(dev_qrels, check)).aggregate["map"]
    best = max(sizes, key=lambda size: (totals[size], -size))
    weights = dict.fromkeys(rank_members(dev_runs, dev_qrels)[:best], 1.0)
    return weights, evaluate(fuse(dev_runs, weights), dev_qrels).aggregate["map"]
