"""Progress of a depth-k pool (the Label queue's ``pool`` order): how large the pool is, how much
of it is judged, and judged@k of every pooled system.

judged@k is ir-measures' ``Judged@k`` (the share of a question's top k that has a judgement, of
min(k, the question's scored pairs)), averaged over every question the system scored, a question
with no judgement at all counting 0 (ir-measures leaves such a question out, which would flatter a
system whose questions nobody has looked at). "Judged" is the queue's: a current label or an
adjudication in the store (``queue.judged_candidates``).

While a system is still scoring in the background (``background.BackgroundScores``), its
top k per question is of the pairs scored so far: the pool grows as it scores and its judged@k would
be of a partial ranking, so ``describe`` calls the pool provisional and gives that system's scoring
progress instead of a judged@k.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qa_core.services.labeling.background import ScoringProgress
from qa_core.services.labeling.queue import judged_candidates
from qa_core.services.labeling.strategies import Scores, TextRecord, pool_ranks

if TYPE_CHECKING:
    from db.store import Store


@dataclass(frozen=True)
class PoolProgress:
    """Counts over one pool (see the module docstring)."""

    depth: int
    size: int  # pairs in the pool: the union of the systems' top ``depth`` per question
    judged: int  # pool pairs with a judgement
    judged_at_depth: dict[str, float]  # system -> mean judged@depth over its questions
    scoring: dict[str, tuple[int, int]] = field(default_factory=dict)  # system still scoring -> (scored, of pairs)

    @property
    def provisional(self) -> bool:
        """Whether a system is still scoring: the pool's size and judged count will move."""
        return bool(self.scoring)

    def describe(self) -> str:
        """One line for the Label page."""
        systems = " · ".join(
            f"{name} scoring ({self.scoring[name][0]:,} of {self.scoring[name][1]:,} pairs)" if name in self.scoring
            else f"{name} {value:.1%}" for name, value in self.judged_at_depth.items())
        pool = (f"Depth-{self.depth} pool so far (provisional until every system has scored: it grows as they "
                "score)" if self.provisional else f"Depth-{self.depth} pool")
        return f"{pool}: {self.judged:,} of {self.size:,} pairs judged · judged@{self.depth} per system: {systems}"


def pool_progress(
    records: Sequence[TextRecord], scores: Mapping[str, Scores], depth: int, judged: Collection[int],
    scoring: Mapping[str, ScoringProgress] | None = None,
) -> PoolProgress:
    """The progress of the depth-``depth`` pool of ``scores``' systems over ``records``; ``scoring``:
    the background scoring of those systems, where one is not done the pool is provisional."""
    judged = set(judged)
    tops = pool_ranks(records, scores, depth)
    qid_of = {r.candidate_id: r.qid for r in records}
    pool = set().union(*tops.values()) if tops else set()
    shares: dict[str, float] = {}
    for system, top in tops.items():
        per_question: dict[str, list[bool]] = defaultdict(list)
        for candidate_id in top:
            per_question[qid_of[candidate_id]].append(candidate_id in judged)
        shares[system] = (sum(sum(marks) / len(marks) for marks in per_question.values()) / len(per_question)
                          if per_question else 0.0)
    still = {system: (state.scored, state.total) for system, state in (scoring or {}).items() if not state.done}
    return PoolProgress(depth=depth, size=len(pool), judged=len(pool & judged), judged_at_depth=shares,
                        scoring=still)


def store_pool_progress(
    store: Store, dataset: str, scores: Mapping[str, Scores], depth: int, split: str | None = None,
    scoring: Mapping[str, ScoringProgress] | None = None,
) -> PoolProgress:
    """``pool_progress`` of the dataset's pairs (one ``split`` if given) and the store's judgements."""
    return pool_progress(store.datasets.candidate_rows(dataset, split=split), scores, depth,
                         judged_candidates(store, dataset), scoring)
