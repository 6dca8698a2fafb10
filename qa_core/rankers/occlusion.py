"""Word occlusion through ``Ranker.score_edits``: the one implementation behind the ``occlusion``
explainer of every ranker (``qa_core.explain.explainers``) and a scoring service's own explanation
(``qa_core.rankers.external``), so a service explains a candidate in one batched request.

A word's weight is the score of the answer's words joined (``qa_core.text.edits``: the edit form of
the faithfulness deletions) minus the score with that word deleted. The drops are subtracted here,
not by Captum's ``Occlusion``: Captum scores the unoccluded input in a forward call of its own, which
through a scoring service is a second request, and with one-word windows its attribution is exactly
this subtraction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qa_core.rankers.base import CandidateInput, Ranker, as_candidates, candidate_at
from qa_core.text.edits import without, words

OCCLUSION = "occlusion"  # the explainer's name, and the weight kind of its explanations


@dataclass(frozen=True)
class WordOcclusion:
    """``score``: the candidate's score with its own text (its pool score); ``weights``: one per
    answer token, the score drop when that word is deleted (0 for whitespace)."""

    score: float
    weights: list[float]


def occlude(ranker: Ranker, question: str, candidates: Sequence[CandidateInput], index: int,
            tokens: Sequence[str], *, score: float | None = None) -> WordOcclusion:
    """Candidate ``index``'s occlusion over its answer ``tokens``: its words joined and each one-word
    deletion scored in one ``score_edits`` batch, with its own text unless the caller already has its
    ``score`` (its explanation's). An answer without words (empty or whitespace) has no deletion to
    subtract from its joined words, so those are not scored: every weight is 0."""
    positions = words(tokens)
    texts = [] if score is not None else [candidate_at(as_candidates(candidates), index).text]
    if positions:
        texts += [without(tokens, ()), *(without(tokens, [position]) for position in positions)]
    scores = iter(ranker.score_edits(question, candidates, index, texts).tolist() if texts else [])
    own = next(scores) if score is None else score
    weights = [0.0] * len(tokens)
    if positions:
        joined = next(scores)
        for position, deleted in zip(positions, scores, strict=True):
            weights[position] = joined - deleted
    return WordOcclusion(float(own), weights)
