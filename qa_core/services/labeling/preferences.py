"""Pairwise and top-k judging (issue 21, item 2): their queues, sessions, and the one rule that turns
preference judgements into graded labels (and so into training labels and qrels).

The rule, per question, over its current judgements by every annotator (docs/annotation.md):

1. Comparisons (winner, loser): a pairwise "left" or "right" gives one; a "tie" (equally good) one
   each way; "both bad" none. A top-k judgement's picks p1..pm (best first) give p_i over p_j for
   i < j and every pick over every candidate of the pool left unpicked; "none fits" gives none.
2. Preferred: a candidate that some judgement chose (a pairwise winner, either side of a tie, a
   pick). Every other candidate that was shown gets grade 0: no judgement ever said it was good.
3. Bradley-Terry log-strengths over the question's compared candidates from ``choix.ilsr_pairwise``
   (ALPHA regularises, so a candidate that never lost still gets a finite strength).
4. The preferred candidates' grades spread over 1..4 by strength: 4 for the strongest, the others
   ``1 + round(3 * (s - s_min) / (s_max - s_min))`` (all 4 when their strengths are equal).

A candidate that was never shown gets no label. Training reads grade > 0 as relevant, so the
relevance a model learns is step 2's; the grades order the relevant ones (nDCG, graded qrels).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from db.labeling import DEFAULT_LEASE_SECONDS
from db.preferences import PAIRWISE, TOPK, PreferenceJudgement
from qa_core.services.labeling.strategies import DEFAULT_POOL_DEPTH, Scores, order_candidates

if TYPE_CHECKING:
    from db.base import CandidateRecord
    from db.store import Store
    from qa_core.access import Actor

ALPHA = 0.1  # choix's L2 regularisation of the log-strengths
PAIR_ROUNDS = 2  # each candidate meets its next and its second-next of the question in queue order
MAX_POOL = 9  # one digit key per candidate of a top-k pool
MAX_GRADE = 4
GRADED = "graded"  # the Label page's third mode, one grade per pair (``labels``)
MODES = {GRADED: "one grade 0–4 per pair", PAIRWISE: "which of two answers is better",
         TOPK: "pick the best k of a pool"}


# ---------------------------------------------------------------------------- the rule


def comparisons(judgement: PreferenceJudgement) -> list[tuple[int, int]]:
    """Step 1 of the rule: the (winner, loser) candidate ids one judgement gives."""
    if judgement.mode == PAIRWISE:
        left, right = judgement.shown
        return {"left": [(left, right)], "right": [(right, left)], "tie": [(left, right), (right, left)]}.get(
            judgement.outcome, []
        )
    picked = list(judgement.picked)
    rest = [c for c in judgement.shown if c not in judgement.picked]
    return [(p, q) for i, p in enumerate(picked) for q in picked[i + 1:] + rest]


def preferred(judgement: PreferenceJudgement) -> set[int]:
    """Step 2: the candidates a judgement chose."""
    if judgement.mode == PAIRWISE:
        left, right = judgement.shown
        return {"left": {left}, "right": {right}, "tie": {left, right}}.get(judgement.outcome, set())
    return set(judgement.picked)


def question_grades(judgements: Sequence[PreferenceJudgement]) -> dict[int, int]:
    """The rule for one question's judgements: ``{candidate_id: grade}`` for every candidate shown."""
    shown = sorted({c for j in judgements for c in j.shown})
    chosen = set().union(*(preferred(j) for j in judgements)) if judgements else set()
    grades = {c: 0 for c in shown if c not in chosen}
    if not chosen:
        return grades
    index = {c: i for i, c in enumerate(shown)}
    pairs = [(index[w], index[lo]) for j in judgements for w, lo in comparisons(j)]
    import choix  # here, not at the top: it loads scipy.stats (1 s), which a training job needs for nothing else

    strengths = choix.ilsr_pairwise(len(shown), pairs, alpha=ALPHA) if pairs else np.zeros(len(shown))
    good = {c: float(strengths[index[c]]) for c in chosen}
    low, high = min(good.values()), max(good.values())
    for c, s in good.items():
        grades[c] = MAX_GRADE if high - low < 1e-9 else 1 + round((MAX_GRADE - 1) * (s - low) / (high - low))
    return grades


def preference_grades(judgements: Iterable[PreferenceJudgement]) -> dict[int, int]:
    """The rule over a dataset's judgements: ``{candidate_id: grade}`` of every candidate shown."""
    by_question: dict[str, list[PreferenceJudgement]] = defaultdict(list)
    for judgement in judgements:
        by_question[judgement.qid].append(judgement)
    return {c: g for group in by_question.values() for c, g in question_grades(group).items()}


def preference_qrels(grades: Mapping[int, int], records: Sequence[CandidateRecord]) -> dict[str, dict[str, int]]:
    """``{qid: {doc_id: grade}}`` (``qa_core.data.exporters.write_qrels``'s input) of the graded candidates."""
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for record in records:
        if record.candidate_id in grades:
            qrels[record.qid][record.doc_id] = grades[record.candidate_id]
    return dict(qrels)


# ---------------------------------------------------------------------------- queues


def pair_queue(order: Sequence[int], records: Sequence[CandidateRecord], rounds: int = PAIR_ROUNDS) -> list[tuple[int, int]]:
    """Pairs to judge, from a strategy's candidate order: round r pairs each candidate with the
    r-th next candidate of its question in that order (round 1 chains every question's candidates,
    so its comparisons connect them all); round 1 comes first, each round in the order's sequence."""
    question_of = {r.candidate_id: r.qid for r in records}
    by_question: dict[str, list[int]] = defaultdict(list)
    for candidate_id in order:
        by_question[question_of[candidate_id]].append(candidate_id)
    position = {c: i for i, c in enumerate(order)}
    pairs = []
    for r in range(1, rounds + 1):
        round_pairs = [(ids[i], ids[i + r]) for ids in by_question.values() for i in range(len(ids) - r)]
        pairs += sorted(round_pairs, key=lambda pair: position[pair[0]])
    return pairs


def pool_queue(order: Sequence[int], records: Sequence[CandidateRecord], size: int = MAX_POOL) -> list[tuple[int, ...]]:
    """One pool per question (its first ``size`` candidates in the strategy's order), questions in
    the order their first candidate comes; a question with one candidate has nothing to compare."""
    question_of = {r.candidate_id: r.qid for r in records}
    by_question: dict[str, list[int]] = defaultdict(list)
    for candidate_id in order:
        by_question[question_of[candidate_id]].append(candidate_id)
    return [tuple(ids[:size]) for ids in by_question.values() if len(ids) >= 2]


@dataclass
class PreferenceSession:
    """One annotator's pairwise or top-k queue in one app session (``holder``): the next item is
    the first in queue order this annotator has not judged (skipped ones go last) that no other
    session holds. The item shown is leased to the session through the store's queue claims
    (``LabelingStore.claim_group``, one per candidate), so two sessions never show the same item, nor
    one candidate, at once; a lease that runs out (a closed tab) frees its item."""

    store: Store
    dataset: str
    annotator: str
    mode: str
    items: list[tuple[int, ...]]
    records: dict[int, CandidateRecord]
    holder: str | None = None
    actor: Actor | None = None
    lease_seconds: float = DEFAULT_LEASE_SECONDS

    @classmethod
    def build(
        cls, store: Store, dataset: str, annotator: str, mode: str, strategy: str, *, seed: int = 0,
        scores: Mapping[str, Scores] | None = None, split: str | None = None, holder: str | None = None,
        actor: Actor | None = None, lease_seconds: float = DEFAULT_LEASE_SECONDS, depth: int = DEFAULT_POOL_DEPTH,
    ) -> PreferenceSession:
        """A session in ``strategy``'s order (``depth``: the ``pool`` order's)."""
        records = store.datasets.candidate_rows(dataset, split=split)
        order = order_candidates(strategy, records, seed=seed, scores=scores, depth=depth)
        items = pair_queue(order, records) if mode == PAIRWISE else pool_queue(order, records)
        return cls(store, dataset, annotator, mode, list(items), {r.candidate_id: r for r in records}, holder, actor,
                   lease_seconds)

    def judged(self) -> set[tuple[int, ...]]:
        return {j.shown for j in self.store.preferences.preference_judgements(self.dataset, self.annotator, self.mode)}

    def current(self, skipped: Sequence[tuple[int, ...]] = ()) -> tuple[int, ...] | None:
        """The item to show now, leased to this session (the same one on every call until it is
        judged, skipped or undone); ``skipped`` (this session's skips, oldest first) come after the
        rest. ``None``: nothing left for this annotator that no other session holds."""
        judged = self.judged()
        waiting = [item for item in self.items if item not in judged]
        later = [item for item in skipped if item in waiting]
        fresh = [item for item in waiting if item not in later]
        return self.store.queue.claim_group(fresh + later, self.annotator, self.holder, lease_seconds=self.lease_seconds,
                                      actor=self.actor)

    def release(self) -> None:
        """Hand the item on screen back: skipped (the caller puts it last in this session's order)
        or undone (the queue order decides again)."""
        self.store.queue.release_claims(self.dataset, self.holder or self.annotator, actor=self.actor)

    def progress(self) -> tuple[int, int]:
        """(judged by this annotator, items in the queue)."""
        judged = self.judged()
        return sum(item in judged for item in self.items), len(self.items)

    def judge_pair(self, item: tuple[int, ...], outcome: str) -> int:
        left, right = item
        return self.store.preferences.judge_pair(left, right, outcome, self.annotator, self.holder, actor=self.actor)

    def judge_pool(self, item: tuple[int, ...], picked: Sequence[int]) -> int:
        return self.store.preferences.judge_pool(item, picked, self.annotator, self.holder, actor=self.actor)

    def undo(self) -> tuple[int, ...] | None:
        """Retract this session's last judgement in this mode; the item it was about, or ``None``."""
        undone = self.store.preferences.undo_preference(self.annotator, self.dataset, self.mode, self.holder, actor=self.actor)
        if undone is not None:
            self.release()
        return None if undone is None else undone["shown"]

