"""Why is candidate A ranked above candidate B: the words of each that move score(A) - score(B).

By default A is the highest-ranked wrong answer that beats a right one and B the best-ranked right
one below it (a labelled pool where a wrong answer beats a right one): with #1 right, #2 wrong and #3
right, that is #2 against #3, one of the pairs Ask's "right answers ranked below a wrong one" counts. The attributions are the chosen explainer's, applied to
each side: A's words carry their attribution to score(A) (deleting a positive one narrows the gap),
B's words carry minus their attribution to score(B) (deleting a negative one narrows it too).
Faithfulness is measured the same way as for one candidate (``qa_core.faithfulness``): the gap
without A's top-k% words against without k% random words of A, and the same for B's words that hold
B up. The gap after an edit of A keeps B's score as ranked, exact for a model whose pair score does not
depend on its pool; for a pool-dependent one (BM25's pool IDF, a fusion's per-pool normalisation)
an edit of A also moves B a little, which this leaves out and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import pandas as pd

from qa_core.faithfulness import PairDeletions
from qa_core.rankers.base import Explanation, ScoredCandidate
from qa_core.services.ranking import LIVE_FRACTION, Ranking
from qa_core.types import InputError


@dataclass(frozen=True)
class Contrast:
    """A above B: both candidates, their explanations towards the gap, and the deletion tests."""

    above: ScoredCandidate
    below: ScoredCandidate
    above_explanation: Explanation  # weights: attribution to score(A)
    below_explanation: Explanation  # weights: minus the attribution to score(B)
    above_test: PairDeletions
    below_test: PairDeletions
    pool_dependent: bool

    @property
    def gap(self) -> float:
        return self.above.score - self.below.score

    def narrowed(self, fraction: float = LIVE_FRACTION) -> tuple[float, float]:
        """How much deleting A's top ``fraction`` of words narrows the gap, and random words of A."""
        return self.above_test.comprehensiveness[fraction], self.above_test.random_comprehensiveness[fraction]

    def widened(self, fraction: float = LIVE_FRACTION) -> tuple[float, float]:
        """How much B's score drops without its top ``fraction`` of words (the gap widens), and random."""
        return self.below_test.comprehensiveness[fraction], self.below_test.random_comprehensiveness[fraction]


def labels_of(result: Ranking, stored: Mapping[str, int] | None = None) -> dict[int, int]:
    """Each ranked candidate's label by rank: the gold label, else the stored one; unlabelled left out."""
    stored = stored or {}
    labels = {}
    for scored in result.scored:
        label = scored.candidate.label if scored.candidate.label is not None else stored.get(scored.candidate.doc_id)
        if label is not None:
            labels[scored.rank] = label
    return labels


def default_pair(result: Ranking, stored: Mapping[str, int] | None = None) -> tuple[int, int] | None:
    """(rank of the highest-ranked wrong answer with a right one below it, rank of the best-ranked
    right one below that); ``None`` when no wrong answer is ranked above a right one."""
    labels = labels_of(result, stored)
    above = min((rank for rank, label in labels.items() if label <= 0), default=None)
    below = min((rank for rank, label in labels.items() if label > 0 and above is not None and rank > above),
                default=None)
    return None if below is None else (above, below)


def contrast(result: Ranking, above: int, below: int, explainer: str | None = None) -> Contrast:
    """Why the candidate ranked ``above`` beats the one ranked ``below``, by ``explainer``."""
    if above == below:
        raise InputError("pick two different candidates to compare")
    if above > below:
        above, below = below, above
    toward_b = result.explain(below, explainer)
    return Contrast(
        above=result.at(above),
        below=result.at(below),
        above_explanation=result.explain(above, explainer),
        below_explanation=replace(toward_b, answer_weights=[-w for w in toward_b.answer_weights],
                                  question_weights=None),
        above_test=result.deletion_test(above, explainer),
        below_test=result.deletion_test(below, explainer),
        pool_dependent=result.ranker.capabilities.pool_dependent,
    )


VIEW = "contrast"  # the Ask page's ``view`` query value that opens the contrastive view


def wrong_above_right(row: Any) -> bool:
    """An Errors table row where a wrong answer is ranked above a right one: AP below 1 with a right
    answer in the pool."""
    return row.correct > 0 and row.AP < 1


def ask_params(dataset: str, qid: str, model: str, row: Any) -> dict[str, str]:
    """The Ask link's query of an Errors row: the contrastive view open where a wrong answer wins."""
    return {"dataset": dataset, "qid": qid, "model": model, **({"view": VIEW} if wrong_above_right(row) else {})}


def contrast_links(table: pd.DataFrame, dataset: str, model: str) -> list[str | None]:
    """Per row of the Errors table, the contrastive view's address where a wrong answer is ranked
    above a right one, else ``None``."""
    return ["/Ask?" + urlencode(ask_params(dataset, row.qid, model, row)) if wrong_above_right(row) else None
            for row in table.itertuples()]
