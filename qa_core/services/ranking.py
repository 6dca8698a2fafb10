"""One request path: what a page shows is exactly what the model computed.

``rank_pool`` scores a pool once and keeps everything a page needs of that one computation in a
``Ranking``: the ranker object that scored (a version promoted meanwhile cannot change what is
explained), the question analysis that ranker read, and the scored ``Candidate`` records with
their doc_id, first-stage rank and URL. The table is a view of them; an explanation is computed
when a candidate is opened, for that candidate in that same pool, and kept in the request; a
counterfactual edit is scored against the request's own scores.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from qa_core import ordering
from qa_core.classifiers.analysis import QuestionAnalysis
from qa_core.explain import explainers
from qa_core.faithfulness import PairDeletions, pair_deletions
from qa_core.rankers.base import Explanation, Ranker, ScoredCandidate
from qa_core.services import explaining
from qa_core.services.candidate_pools import check_candidate, check_question
from qa_core.text.nlp import parse
from qa_core.types import Candidate, InputError

LIVE_FRACTION = 0.2  # the share of words the page's live faithfulness test deletes
RESULT_COLUMNS = ["rank", "score", "tied", "first_stage_rank", "rank_change", "gold_label", "text", "doc_id",
                  "stored_label"]


@dataclass(frozen=True)
class AnalysisSummary:
    """What a page says about the question analysis a model read: class, focus words, who decided."""

    qclass: str | None
    focus_words: str | None
    source: str
    probabilities: dict[str, float]


def summarise(question: str, analysis: QuestionAnalysis) -> AnalysisSummary:
    """Class and focus of ``question`` (the focus as its noun chunk's words)."""
    words = None
    if analysis.focus_span is not None:
        tokens = parse(question).tokens
        start, end = analysis.focus_span
        words = " ".join(token for token in tokens[start:end] if token.strip())
    return AnalysisSummary(analysis.qclass, words, analysis.source, dict(analysis.probabilities))


@dataclass(frozen=True)
class Counterfactual:
    """An edited candidate's score against its original's, and its explanation."""

    text: str
    score: float
    original_score: float
    rank: int  # where the edited text would rank among the other candidates (1-based)
    explanation: Explanation
    explainer: str  # which computed ``explanation`` (``qa_core.explain.explainers``)

    @property
    def delta(self) -> float:
        return self.score - self.original_score


@dataclass
class Ranking:
    """One ranked request. ``scored`` is best first; ``analysis`` is the model's own (``None`` when
    the model reads no question analysis)."""

    ranker: Ranker
    model: str  # what was asked for: a registered name or a checkpoint path
    question: str
    qid: str | None
    pool: tuple[Candidate, ...]
    scored: tuple[ScoredCandidate, ...]
    analysis: QuestionAnalysis | None
    _explanations: dict[tuple[int, str], Explanation] = field(default_factory=dict, repr=False)
    _deletions: dict[tuple[int, str], PairDeletions] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __len__(self) -> int:
        return len(self.scored)

    def at(self, rank: int) -> ScoredCandidate:
        """The candidate ranked ``rank`` (1-based)."""
        if not 1 <= rank <= len(self.scored):
            raise InputError(f"no candidate at rank {rank} of {len(self.scored)}")
        return self.scored[rank - 1]

    def rank_of(self, doc_id: str) -> int:
        """The rank of the candidate ``doc_id`` (how Compare finds one candidate in each model's ranking)."""
        for scored in self.scored:
            if scored.candidate.doc_id == doc_id:
                return scored.rank
        raise InputError(f"no candidate {doc_id!r} in this ranking")

    def tied(self) -> int:
        """How many candidates share their score with another of the pool."""
        return ordering.tied_count([s.score for s in self.scored])

    def summary(self) -> AnalysisSummary | None:
        return None if self.analysis is None else summarise(self.question, self.analysis)

    def pool_note(self) -> str | None:
        """For a pool-dependent model (BM25 as a reranker), why its order differs from the first
        stage's though both may be "BM25": its statistics come from this pool, not the collection.
        ``None`` for any other model."""
        if not self.ranker.capabilities.pool_dependent:
            return None
        staged = [s for s in self.scored if s.candidate.first_stage_rank is not None]
        moved = sum(s.rank != s.candidate.first_stage_rank for s in staged)
        change = (f" Here {moved} of {len(staged)} candidates moved from their first-stage rank (rank change)."
                  if staged else "")
        return (f"{self.model} scores with statistics of this pool only: its IDF comes from the "
                f"{len(self.scored)} candidates being reranked, not from the collection the first stage searched, so "
                f"a word that most candidates share counts for little, and the order can move far from the "
                f"first-stage ranks (a right answer at first-stage rank 1 may drop).{change}")

    def table(self, stored_labels: Mapping[str, int] | None = None) -> pd.DataFrame:
        """The ranked candidates as a table (``RESULT_COLUMNS``; missing values are ``<NA>``).

        rank_change is positive when the model moved a candidate up from its first-stage rank;
        tied: another candidate has exactly this score (``qa_core.ordering`` decides their order);
        stored_label is the latest label in the store (``stored_labels`` ``{doc_id: grade}``).
        """
        stored = stored_labels or {}
        rows = [s.candidate for s in self.scored]
        return pd.DataFrame(
            {
                "rank": [s.rank for s in self.scored],
                "score": [s.score for s in self.scored],
                "tied": ordering.tied_flags([s.score for s in self.scored]),
                "first_stage_rank": pd.array([c.first_stage_rank for c in rows], dtype="Int64"),
                "rank_change": pd.array([s.rank_change for s in self.scored], dtype="Int64"),
                "gold_label": pd.array([c.label for c in rows], dtype="Int64"),
                "text": [c.text for c in rows],
                "doc_id": [c.doc_id for c in rows],
                "stored_label": pd.array([stored.get(c.doc_id) for c in rows], dtype="Int64"),
            },
            columns=RESULT_COLUMNS,
        )

    def explain(self, rank: int, explainer: str | None = None) -> Explanation:
        """The explanation of the candidate ranked ``rank``, in this pool, by ``explainer``
        (``qa_core.explain.explainers``; default: the model's, chosen on DEV), computed once."""
        key = (self.at(rank).index, explainer or explaining.default_explainer(self.ranker))
        with self._lock:
            cached = self._explanations.get(key)
        if cached is None:
            cached = explainers.explain(self.ranker, self.question, self.pool, *key)
            with self._lock:
                self._explanations[key] = cached
        return cached

    def deletion_test(self, rank: int, explainer: str | None = None) -> PairDeletions:
        """The faithfulness test of the candidate's heatmap by ``explainer``, live
        (``qa_core.faithfulness``): its score without its top ``LIVE_FRACTION`` of words and with
        only them, against random words."""
        key = (self.at(rank).index, explainer or explaining.default_explainer(self.ranker))
        with self._lock:
            cached = self._deletions.get(key)
        if cached is None:
            cached = pair_deletions(
                self.ranker, self.question, self.pool, key[0], self.explain(rank, key[1]),
                score=self.at(rank).score, fractions=(LIVE_FRACTION,),
            )
            with self._lock:
                self._deletions[key] = cached
        return cached

    def counterfactual(self, rank: int, edited: str, explainer: str | None = None) -> Counterfactual:
        """Candidate ``rank`` with its text replaced by ``edited``: its score (``Ranker.score_edits``,
        the path the faithfulness deletions take too), its rank among the others' scores in this
        ranking, and its explanation by ``explainer`` (as ``explain``: the heatmap beside it is that
        explainer's, so the two compare); the original score is the table's."""
        edited = check_candidate(edited)
        explainer = explainer or explaining.default_explainer(self.ranker)
        target = self.at(rank)
        new_score = float(self.ranker.score_edits(self.question, self.pool, target.index, [edited])[0])
        pool = list(self.pool)
        pool[target.index] = replace(target.candidate, text=edited)
        # Ranked with the others' scores by the tie rule, as the table ranks (the edit keeps its doc_id).
        scores = {s.candidate.doc_id: s.score for s in self.scored if s.index != target.index}
        ranked = [doc for doc, _ in ordering.ranked({**scores, target.candidate.doc_id: new_score})]
        return Counterfactual(
            text=edited,
            score=new_score,
            original_score=target.score,
            rank=1 + ranked.index(target.candidate.doc_id),
            explanation=explainers.explain(self.ranker, self.question, pool, target.index, explainer),
            explainer=explainer,
        )


def missed_answers(result: Ranking) -> list[int]:
    """Ranks of the gold-relevant candidates with a gold-irrelevant one ranked above them: where to
    look first in an error analysis ("why is the right answer at #12?")."""
    missed, wrong_above = [], False
    for scored in result.scored:
        label = scored.candidate.label
        if label is not None and label > 0 and wrong_above:
            missed.append(scored.rank)
        wrong_above = wrong_above or label == 0
    return missed


def option_label(scored: ScoredCandidate, width: int = 80) -> str:
    """How a candidate is named in a picker: rank, score, gold label, the start of its text."""
    text = " ".join(scored.candidate.text.split())
    short = text if len(text) <= width else text[: width - 1] + "…"
    gold = "" if scored.candidate.label is None else f" · gold {scored.candidate.label}"
    return f"#{scored.rank} · {scored.score:.4f}{gold} · {short}"


def rank_pool(
    ranker: Ranker, question: str, candidates: Sequence[Candidate], *, model: str | None = None, qid: str | None = None
) -> Ranking:
    """Score ``candidates`` for ``question`` once, with the question analysis the ranker reads."""
    question = check_question(question)
    pool = tuple(candidates)
    scored = tuple(ranker.rank(question, pool)) if pool else ()
    return Ranking(ranker, model or ranker.name, question, qid, pool, scored, ranker.question_analysis(question))
