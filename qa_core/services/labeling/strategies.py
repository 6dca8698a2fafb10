"""Queue orders: which (question, candidate) pairs to label first.

One code path for the Label page and the learning-loop simulation. Every strategy is a pure
function of the candidate records, model scores and a seed, and returns candidate ids best
first; the same inputs and seed give the same order (numpy's seeded ``Generator`` breaks ties).

- ``random``: a seeded permutation.
- ``uncertainty``: one model's scores; pairs closest to its decision boundary first. Scores that
  all lie in [0, 1] are read as P(relevant) and the boundary is 0.5. Any other scores (BM25, word
  overlap, logits) are min-max normalised within each question first, so the boundary is the
  middle of that question's score range: the model is surest about the top and the bottom of its
  ranking and least sure about the middle. A question whose scores are all equal is maximally
  uncertain. Uncertainty = 1 - |2p - 1|.
- ``disagreement``: two or more models; each model's scores become within-question percentile
  ranks (0 = last, 1 = first, ties averaged), and a pair's disagreement is the range (max - min)
  of its percentile ranks across the models: rankings, not raw scales, are compared.
- ``diversity``: spreads judgements across questions: round robin over the questions (one pair
  of each question, then a second of each, ...), within a question in seeded random order.
- ``pool``: depth-k pooling (TREC's way of building judgements to compare systems): one or more
  systems' scores; the queue is the union of each system's top ``depth`` per question (ranked by
  ``qa_core.ordering``'s tie rule) and nothing else. Pairs without a judgement come first, then
  the judged ones; each part is spread across questions as ``diversity`` is, a question's pairs by
  their best rank over the systems (the pairs every system puts first, first).

Pairs a strategy cannot place (no score from the model, or from fewer than two models) come
last, in seeded random order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from qa_core import ordering
from qa_core.types import Candidate, InputError

if TYPE_CHECKING:
    from qa_core.rankers.base import Ranker

POOL = "pool"
STRATEGIES = ("random", "uncertainty", "disagreement", "diversity", POOL)
DEFAULT_POOL_DEPTH = 10
Scores = Mapping[int, float]  # candidate id -> score


class PairRecord(Protocol):
    """What a strategy reads of a pair (``db.CandidateRecord`` has it)."""

    @property
    def candidate_id(self) -> int: ...

    @property
    def qid(self) -> str: ...


class TextRecord(PairRecord, Protocol):
    """A pair with its texts, as a ranker needs it (``db.CandidateRecord`` has it)."""

    @property
    def doc_id(self) -> str: ...

    @property
    def question(self) -> str: ...

    @property
    def candidate(self) -> str: ...


R = TypeVar("R", bound=PairRecord)


def order_candidates(
    strategy: str,
    records: Sequence[PairRecord],
    *,
    seed: int = 0,
    scores: Mapping[str, Scores] | None = None,
    depth: int = DEFAULT_POOL_DEPTH,
    judged: Collection[int] = (),
) -> list[int]:
    """Candidate ids of ``records`` best first under ``strategy`` (one of ``STRATEGIES``).

    ``scores`` maps model names to ``{candidate_id: score}``: exactly one model for
    ``uncertainty``, two or more for ``disagreement``, one or more for ``pool``, ignored by the
    others. ``depth`` and ``judged`` (candidate ids with a judgement) are the ``pool`` order's.
    """
    scores = scores or {}
    if strategy == "random":
        return random_order(records, seed)
    if strategy == "diversity":
        return diversity_order(records, seed)
    if strategy == "uncertainty":
        if len(scores) != 1:
            raise InputError(f"the uncertainty order needs the scores of exactly one model, got {len(scores)}")
        return uncertainty_order(records, next(iter(scores.values())), seed)
    if strategy == "disagreement":
        if len(scores) < 2:
            raise InputError(f"the disagreement order needs the scores of two or more models, got {len(scores)}")
        return disagreement_order(records, scores, seed)
    if strategy == POOL:
        if not scores:
            raise InputError("the pool order needs the scores of one or more systems")
        return pool_order(records, scores, depth, judged, seed)
    raise InputError(f"unknown queue order {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def random_order(records: Sequence[PairRecord], seed: int) -> list[int]:
    """A seeded permutation of the records' candidate ids."""
    permutation = np.random.default_rng(seed).permutation(len(records))
    return [records[i].candidate_id for i in permutation]


def uncertainty_order(
    records: Sequence[PairRecord], scores: Scores, seed: int, *, probabilities: bool | None = None
) -> list[int]:
    """Most uncertain first (see the module docstring); ``probabilities`` forces or forbids reading
    the scores as P(relevant) (default: when every score lies in [0, 1])."""
    known = [float(scores[r.candidate_id]) for r in records if r.candidate_id in scores]
    if probabilities is None:
        probabilities = bool(known) and all(0.0 <= s <= 1.0 for s in known)
    if probabilities:
        p = {r.candidate_id: float(scores[r.candidate_id]) for r in records if r.candidate_id in scores}
    else:
        p = {}
        for group in _by_question(records).values():
            scored = [r.candidate_id for r in group if r.candidate_id in scores]
            if not scored:
                continue
            values = np.array([float(scores[c]) for c in scored])
            span = values.max() - values.min()
            normalised = (values - values.min()) / span if span > 0 else np.full(len(values), 0.5)
            p.update(zip(scored, normalised.tolist()))
    return _by_key(records, {c: 1.0 - abs(2.0 * value - 1.0) for c, value in p.items()}, seed)


def disagreement_order(records: Sequence[PairRecord], scores: Mapping[str, Scores], seed: int) -> list[int]:
    """Largest disagreement between the models' within-question percentile ranks first."""
    from scipy.stats import rankdata  # imported on use: scipy.stats takes a second to load

    percentiles: dict[int, list[float]] = defaultdict(list)
    for model_scores in scores.values():
        for group in _by_question(records).values():
            scored = [r.candidate_id for r in group if r.candidate_id in model_scores]
            if not scored:
                continue
            ranks = rankdata([float(model_scores[c]) for c in scored], method="average")
            spread = (ranks - 1) / (len(scored) - 1) if len(scored) > 1 else np.full(len(scored), 0.5)
            for candidate_id, value in zip(scored, spread.tolist()):
                percentiles[candidate_id].append(value)
    disagreement = {c: max(values) - min(values) for c, values in percentiles.items() if len(values) >= 2}
    return _by_key(records, disagreement, seed)


def diversity_order(records: Sequence[PairRecord], seed: int) -> list[int]:
    """Round robin over questions, each question's pairs in seeded random order."""
    return spread_across_questions(random_order(records, seed), records)


def pool_ranks(records: Sequence[TextRecord], scores: Mapping[str, Scores], depth: int) -> dict[str, dict[int, int]]:
    """``{system: {candidate_id: rank}}``: each system's top ``depth`` of every question (rank 1
    first), ranked by the tie rule (``qa_core.ordering``); pairs a system did not score are not in
    its ranking."""
    if depth < 1:
        raise InputError(f"a pool's depth must be at least 1, got {depth}")
    tops: dict[str, dict[int, int]] = {}
    for system, system_scores in scores.items():
        top: dict[int, int] = {}
        for group in _by_question(records).values():
            scored = [r for r in group if r.candidate_id in system_scores]
            best = ordering.order([r.doc_id for r in scored], [float(system_scores[r.candidate_id]) for r in scored])
            top.update((scored[i].candidate_id, rank) for rank, i in enumerate(best[:depth], start=1))
        tops[system] = top
    return tops


def pool_order(
    records: Sequence[TextRecord], scores: Mapping[str, Scores], depth: int, judged: Collection[int], seed: int
) -> list[int]:
    """The depth-``depth`` pool of the systems in ``scores``, unjudged pairs first (see the module
    docstring); pairs outside the pool are left out."""
    best_rank: dict[int, int] = {}
    for top in pool_ranks(records, scores, depth).values():
        for candidate_id, rank in top.items():
            best_rank[candidate_id] = min(rank, best_rank.get(candidate_id, rank))
    by_rank = [c for c in sorted(random_order(records, seed), key=lambda c: best_rank.get(c, 0)) if c in best_rank]
    judged = set(judged)
    return [
        *spread_across_questions([c for c in by_rank if c not in judged], records),
        *spread_across_questions([c for c in by_rank if c in judged], records),
    ]


def spread_across_questions(order: Sequence[int], records: Sequence[PairRecord]) -> list[int]:
    """Reorder ``order`` so that it takes one pair per question in turn: first every question's
    best pair (questions in the order their best pair appears), then every second-best, ..."""
    qid_of = {r.candidate_id: r.qid for r in records}
    seen_in_question: dict[str, int] = defaultdict(int)
    question_position: dict[str, int] = {}
    keys = {}
    for candidate_id in order:
        qid = qid_of[candidate_id]
        question_position.setdefault(qid, len(question_position))
        keys[candidate_id] = (seen_in_question[qid], question_position[qid])
        seen_in_question[qid] += 1
    return sorted(order, key=keys.__getitem__)


def model_scores(ranker: Ranker, records: Sequence[TextRecord]) -> dict[int, float]:
    """``{candidate_id: score}`` of ``ranker`` over records that carry their texts (e.g.
    ``DatasetStore.candidate_rows``), one pool per question, batched with ``score_pools``; the pairs
    it does not rank (``Ranker.covered``: a partial run's) have no score, so a depth-k pool gets
    nothing from the system for them."""
    groups = _by_question(records)
    pools = [(group[0].question, [Candidate(r.doc_id, r.candidate) for r in group]) for group in groups.values()]
    result: dict[int, float] = {}
    for group, pool_scores, covered in zip(groups.values(), ranker.score_pools(pools), ranker.covered(pools)):
        result.update({r.candidate_id: float(s) for r, s, ranked in zip(group, pool_scores, covered) if ranked})
    return result


def _by_question(records: Sequence[R]) -> dict[str, list[R]]:
    groups: dict[str, list[R]] = defaultdict(list)
    for record in records:
        groups[record.qid].append(record)
    return groups


def _by_key(records: Sequence[PairRecord], key: Mapping[int, float], seed: int) -> list[int]:
    """Ids with a key by key descending, then the rest; ties in seeded random order."""
    # Python's sort is stable: equal keys keep the seeded random order.
    return sorted(random_order(records, seed), key=lambda c: (c not in key, -key.get(c, 0.0)))
