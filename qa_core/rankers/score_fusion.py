"""Score fusion of registered rankers as a ranker of its own: members trained on TRAIN, the fusion
(``qa_core.fusion``: ranx's weighted sums of z-scored or min-max scores, RRF, CombMNZ) tuned on DEV.

Why a ranker and not only a run: a fused model then goes wherever a model goes (Ask, Compare, Errors,
Train, the learning loop, ``batch-score``) with its members inside one checkpoint, and a request is
explained by the members' own explanations.

``fit`` trains each member through its own ``fit`` (each selects on DEV as it always does), scores
DEV with every member and lets ``qa_core.fusion.tune_fusion`` choose the method's parameters on
DEV's labels. TEST is never handed to it. The members are the fusion's own copies, trained with it
and saved in its checkpoint: a version of a member promoted on its own is not used (nor changed).
``score_pools`` has every member score the pools and ranx fuse them per pool (``apply_fusion``; each
pool is one "query" of the fused run, so normalisation and RRF's ranks are per pool:
``pool_dependent``).

Defaults, chosen on DEV only by ``benchmarks/fusion_default.py`` (its rule was fixed before the run:
a neural member among smcnn, cnn_wo and compare_aggregate with bm25 or overlap, by every method of
``qa_core.fusion.METHODS``; score: held-out DEV MAP under 3x repeated 2-fold cross-validation over
DEV's questions, averaged over seeds 1-5 of the kept DEV runs and over TrecQA and WikiQA):
compare_aggregate + overlap, weighted sum of min-max scores, 0.7863 (TrecQA 0.8287, WikiQA 0.7439),
against 0.7854 with z-scores and 0.7829 for smcnn + overlap: the top candidates are within 0.4 points,
so the choice among them is close to a tie. Compare-aggregate's own DEV MAP (the split its epochs
were selected on) averages 0.7681.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from qa_core.evaluation import evaluate, qrels_from_questions, run_from_scores
from qa_core.fusion import METHODS, Fusion, apply_fusion, tune_fusion
from qa_core.rankers import registry
from qa_core.rankers.base import CandidateInput, Capabilities, Explanation, Pool, Ranker, RankerConfig, candidate_at
from qa_core.rankers.compare_aggregate import CompareAggregateConfig
from qa_core.training.events import ProgressCallback, TrainingEvent
from qa_core.types import InputError, NotTrainedError, Question

if TYPE_CHECKING:
    from qa_core.classifiers.analysis import QuestionAnalysis, QuestionAnalyzer

TRAINING_SETTINGS = ("max_epochs",)
"""The fusion's settings a training job may set; each is passed on to the members that declare it."""


@dataclass(frozen=True)
class FusionConfig(RankerConfig):
    """``members``: registered model names (two or more, in order); ``method``: a key of
    ``qa_core.fusion.METHODS``; ``max_epochs``: passed on to every member that takes it (default:
    compare-aggregate's own)."""

    members: tuple[str, ...] = ("compare_aggregate", "overlap")
    method: str = "wsum-minmax"
    max_epochs: int = CompareAggregateConfig.max_epochs


@cache
def member_capabilities(members: tuple[str, ...]) -> Capabilities:
    """What a fusion of ``members`` can do: it always trains (the fusion is tuned on DEV labels) and
    depends on the pool (scores are normalised per pool); it reads what any member reads; its
    explanation has answer weights, and links, matrices and trees when a member has them, question
    weights only when every member has them (a mix over some members would misstate the others)."""
    caps = [registry.ranker_class(name).capabilities for name in members]
    explains = {"answer_weights"} | {part for c in caps for part in c.explains if part in ("links", "matrices", "trees")}
    if all("question_weights" in c.explains for c in caps):
        explains.add("question_weights")
    return Capabilities(
        trainable=True,
        pool_dependent=True,
        training_settings=TRAINING_SETTINGS,
        explains=frozenset(explains),
        reads=frozenset(part for c in caps for part in c.reads),
    )


class _MembersCapabilities:
    """``capabilities`` read from the members: on the class, the default members' (what a page or a
    job asks before a model exists); on an instance, its own members'. Computed when read, not at
    import: the registry is still importing the rankers then."""

    def __get__(self, ranker: FusionRanker | None, owner: type[FusionRanker]) -> Capabilities:
        config = ranker.config if ranker is not None else owner.config_class()
        return member_capabilities(tuple(config.members))


class FusionRanker(Ranker):
    """Registered rankers fused through ranx, tuned on DEV (module docstring)."""

    name = "fusion"
    title = "Score fusion through ranx, tuned on DEV (default: compare_aggregate + overlap, min-max weighted sum)"
    config_class = FusionConfig
    capabilities = _MembersCapabilities()  # type: ignore[assignment]
    config: FusionConfig

    def __init__(self, config: FusionConfig | None = None) -> None:
        super().__init__(config)
        members = tuple(self.config.members)
        if len(members) < 2 or len(set(members)) != len(members):
            raise InputError(f"a fusion needs two or more different models, not {', '.join(members) or 'none'}")
        if self.name in members:
            raise InputError("a fusion cannot have a fusion among its members")
        if self.config.method not in METHODS:
            raise InputError(f"unknown fusion {self.config.method!r}; choose one of {', '.join(METHODS)}")
        self.members: dict[str, Ranker] = {name: self._new_member(name) for name in members}
        self.recipe: Fusion | None = None

    def _new_member(self, name: str) -> Ranker:
        """The member with the fusion's training settings that it declares (e.g. ``max_epochs``)."""
        declared = registry.ranker_class(name).capabilities.training_settings
        return registry.create(name, **{s: getattr(self.config, s) for s in TRAINING_SETTINGS if s in declared})

    # ------------------------------------------------------------------ training

    def fit(self, train: Sequence[Question], dev: Sequence[Question], *, seed: int = 1,
            analyzer: QuestionAnalyzer | None = None, progress: bool = True,
            callback: ProgressCallback | None = None) -> dict[str, Any]:
        """Fit every member that learns (labels or statistics) on ``train``, each selecting on ``dev``
        as it does alone, then tune the fusion on the members' DEV runs and DEV's labels.

        Progress events count stages, one per member, then the tuning: a member's own events are
        relayed with its loss and dev MAP (its own step and total in ``detail``), each stage ends
        with the member's DEV MAP, and the last event carries the fused DEV MAP.
        """
        labelled = [q for q in dev if any(c.label is not None for c in q.candidates)]
        pools = [(q.text, q.candidates) for q in labelled]
        qrels = qrels_from_questions(labelled)
        stages = len(self.members) + 1
        reports: dict[str, Any] = {}
        dev_runs: dict[str, dict[str, dict[str, float]]] = {}
        for stage, (name, member) in enumerate(self.members.items(), start=1):
            if member.capabilities.trainable or member.capabilities.learns_statistics:
                relay = None if callback is None else _relay(callback, name, stage, stages)
                reports[name] = member.fit(train, dev, seed=seed, analyzer=analyzer, progress=progress, callback=relay)
            dev_runs[name] = run_from_scores(labelled, member.score_pools(pools))
            if callback is not None and qrels:
                dev_map = evaluate(dev_runs[name], qrels).aggregate["map"]
                callback(TrainingEvent(stage, stages, "stage", dev_map=dev_map, detail={f"{name} dev MAP": dev_map}))
        self.recipe = tune_fusion(self.config.method, dev_runs, qrels)
        if callback is not None:
            callback(TrainingEvent(stages, stages, "stage", dev_map=self.recipe.dev_map,
                                   detail={f"weight {n}": w for n, w in self._weights().items()}))  # fmt: skip
        return {"best_dev_map": self.recipe.dev_map, "fusion": asdict(self.recipe), "members": reports}

    def _recipe(self) -> Fusion:
        if self.recipe is None:
            raise NotTrainedError(f"{self.name} is not trained yet: train it (fit) or load a checkpoint before scoring")
        return self.recipe

    def _weights(self) -> dict[str, float]:
        """Each member's weight in the fusion: the tuned weights of a weighted sum; equal for RRF and
        CombMNZ, where every member counts alike."""
        recipe = self._recipe()
        weights = recipe.params.get("weights") or [1.0] * len(recipe.members)
        return {name: float(w) for name, w in zip(recipe.members, weights, strict=True)}

    # ------------------------------------------------------------------ scoring

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        """Every member scores all pools; ranx fuses them pool by pool (pools keyed by position, so
        repeated questions or doc ids cannot collide)."""
        recipe = self._recipe()
        runs = {name: _positional_run(member.score_pools(pools)) for name, member in self.members.items()}
        fused = apply_fusion(recipe, runs)
        return [
            np.array([fused[str(p)][str(i)] for i in range(len(candidates))], dtype=np.float64)
            for p, (_, candidates) in enumerate(pools)
        ]

    def question_analysis(self, question: str) -> QuestionAnalysis | None:
        """The first member's analysis that reads one (members trained together share the analyzer)."""
        for member in self.members.values():
            analysis = member.question_analysis(question)
            if analysis is not None:
                return analysis
        return None

    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        """The fused score of candidate ``index`` in its pool, and the members' explanations mixed.

        Answer (and question) weights: each member's weights divided by the sum of their absolute
        values (so each member's shares sum to 1 in size, keeping signs), then averaged with the
        members' fusion weights (equal for RRF and CombMNZ). It says which words the members leaned
        on, weighted by how much the fusion trusts each member; it is not a decomposition of the
        fused score (z-scores, min-max and RRF's ranks are not linear in a member's word weights).
        Links: every member's, once each; matrices and trees: every member's, named by member.
        """
        candidate_at(candidates, index)
        score = float(self.score(question, candidates)[index])
        weights = self._weights()
        parts = {name: member.explain(question, candidates, index) for name, member in self.members.items()}
        first = next(iter(parts.values()))
        answer = _mix({n: e.answer_weights for n, e in parts.items()}, weights)
        question_parts = {n: e.question_weights for n, e in parts.items()}
        has_question = all(w is not None for w in question_parts.values())
        links = list(dict.fromkeys(link for e in parts.values() for link in e.links))
        reads = [e.answer_tokens_read for e in parts.values()]
        return Explanation(
            score=score,
            question_tokens=first.question_tokens,
            answer_tokens=first.answer_tokens,
            answer_weights=answer,
            weight_kind="fused share (" + " + ".join(f"{weights[n]:.2g} × {e.weight_kind}" for n, e in parts.items()) + ")",
            question_weights=_mix(question_parts, weights) if has_question else None,
            matrices={f"{n}: {k}": m for n, e in parts.items() for k, m in e.matrices.items()},
            links=links,
            trees={f"{n}: {k}": t for n, e in parts.items() for k, t in e.trees.items()},
            answer_tokens_read=None if None in reads else max(reads),
        )

    # ------------------------------------------------------------------ persistence and device

    def state(self) -> dict[str, Any]:
        recipe = self._recipe()
        return {
            **super().state(),
            "members": {name: member.state() for name, member in self.members.items()},
            "recipe": {"method": recipe.method, "members": list(recipe.members), "params": dict(recipe.params),
                       "dev_map": recipe.dev_map},
        }  # fmt: skip

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FusionRanker:
        ranker = cls(cls.configure(**state["config"]))
        if set(state["members"]) != set(ranker.members):
            raise ValueError(f"members {sorted(state['members'])} do not match the config's {sorted(ranker.members)}")
        ranker.members = {name: registry.ranker_class(name).from_state(state["members"][name]) for name in ranker.members}
        recipe = state["recipe"]
        ranker.recipe = Fusion(recipe["method"], tuple(recipe["members"]), dict(recipe["params"]), recipe["dev_map"])
        return ranker

    @property
    def device(self) -> str:
        """Where the members that hold tensors score (``cpu`` when none does)."""
        return next((m.device for m in self.members.values() if m.device != "cpu"), "cpu")

    def to(self, device: str) -> FusionRanker:
        for member in self.members.values():
            member.to(device)
        return self


def _relay(callback: ProgressCallback, member: str, stage: int, stages: int) -> ProgressCallback:
    """A member's events as the fusion's: its stage of ``stages``, the member's loss and dev MAP, and
    the member's own step and total in ``detail``."""

    def relay(event: TrainingEvent) -> None:
        own = {f"{member} {event.unit}": float(event.step), f"{member} {event.unit}s planned": float(event.total or 0)}
        callback(TrainingEvent(stage, stages, "stage", event.batch, event.loss, event.dev_map,
                               {**own, **{f"{member} {k}": v for k, v in event.detail.items()}}))  # fmt: skip

    return relay


def _positional_run(scores: Sequence[np.ndarray]) -> dict[str, dict[str, float]]:
    """Pools' scores as a run keyed by pool and candidate position."""
    return {str(p): {str(i): float(s) for i, s in enumerate(pool)} for p, pool in enumerate(scores)}


def _mix(parts: Mapping[str, Sequence[float] | None], weights: Mapping[str, float]) -> list[float]:
    """The members' per-token weights, each scaled to absolute sum 1, averaged with ``weights``.
    Members whose token count differs from the first's are left out (they tokenised differently)."""
    rows = {name: np.asarray(values, dtype=np.float64) for name, values in parts.items() if values is not None}
    length = len(next(iter(rows.values())))
    mixed, total = np.zeros(length), 0.0
    for name, row in rows.items():
        if len(row) != length:
            continue
        size = np.abs(row).sum()
        mixed += weights[name] * (row / size if size > 0 else row)
        total += weights[name]
    return (mixed / total if total > 0 else mixed).tolist()
