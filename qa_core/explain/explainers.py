"""The explainers a model offers, chosen by what the model declares (``Capabilities``), never by
its class.

- ``model``: the model's own ``explain`` weights (attention, saliency, BM25 shares, IDF, REL
  matches, fused shares), labelled with what they are (``Explanation.weight_kind``);
- ``occlusion``: every ranker: the score drop when one answer word is deleted
  (``qa_core.rankers.occlusion``: every deletion in one batch of ``Ranker.score_edits``, the path of
  the faithfulness deletions and the Ask page's edits, so one request to a scoring service, whose
  own weights are this occlusion);
- ``integrated_gradients``, ``gradient_x_input``, ``embedding_occlusion``: neural rankers
  (``capabilities.neural``): Captum over the embedded question and answer words
  (``qa_core.nn.attribution``).

Each returns the model's own explanation (score, tokens, links, matrices, trees) with its word
weights replaced by the method's, so every view of an explanation shows any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from qa_core.nn import attribution
from qa_core.nn.attribution import WordAttributions
from qa_core.rankers.base import CandidateInput, Capabilities, EmbeddedPair, Explanation, Ranker
from qa_core.rankers.neural import spread
from qa_core.rankers.occlusion import OCCLUSION, occlude
from qa_core.types import InputError

MODEL = "model"


@dataclass(frozen=True)
class Explainer:
    """One attribution method: ``name`` (stable, stored in results), ``title`` (what a page shows),
    whether it needs a neural model, and the function that explains candidate ``index``."""

    name: str
    title: str
    neural_only: bool
    explain: Callable[[Ranker, str, Sequence[CandidateInput], int], Explanation]


def _embedded(method: Callable[[attribution.EmbeddedInputs], WordAttributions], kind: str):
    """An explainer from a Captum method over a neural ranker's embedded words."""

    def explain(ranker: Ranker, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        own = ranker.explain(question, candidates, index)
        pair: EmbeddedPair = ranker.embedded_pair(question, candidates, index)
        q_values, a_values = method(pair.embedded)
        return replace(
            own,
            answer_weights=spread(a_values, pair.answer_positions, pair.answer_length),
            question_weights=spread(q_values, pair.question_positions, pair.question_length),
            weight_kind=kind,
        )

    return explain


def _integrated_gradients(embedded: attribution.EmbeddedInputs) -> WordAttributions:
    return attribution.integrated_gradients(embedded)[0]


def _word_occlusion(ranker: Ranker, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
    """Score drop per deleted answer word over the model's own explanation; a model whose own
    weights already are this occlusion (a scoring service) is not asked twice."""
    own = ranker.explain(question, candidates, index)
    if own.weight_kind == OCCLUSION:
        return own
    occluded = occlude(ranker, question, candidates, index, own.answer_tokens, score=own.score)
    return replace(own, answer_weights=occluded.weights, question_weights=None, weight_kind=OCCLUSION)


def _own(ranker: Ranker, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
    return ranker.explain(question, candidates, index)


EXPLAINERS: dict[str, Explainer] = {
    e.name: e
    for e in (
        Explainer(MODEL, "the model's own weights", False, _own),
        Explainer(OCCLUSION, "occlusion: score drop when the word is deleted", False, _word_occlusion),
        Explainer(
            "integrated_gradients",
            f"Integrated Gradients over the word embeddings, {attribution.IG_STEPS} steps from zero vectors (Captum)",
            True,
            _embedded(_integrated_gradients, "integrated gradients"),
        ),
        Explainer(
            "gradient_x_input", "gradient × input over the word embeddings (Captum)", True,
            _embedded(attribution.gradient_x_input, "gradient × input"),
        ),
        Explainer(
            "embedding_occlusion", "occlusion: score drop when the word's vector is zeroed (Captum)", True,
            _embedded(attribution.embedding_occlusion, "embedding occlusion"),
        ),
    )
}


def available(capabilities: Capabilities) -> list[str]:
    """The explainers a model with these capabilities offers, in a fixed order. A model whose own
    weights are one of them (``Capabilities.own_weights``) offers that one once, by its name,
    rather than a second time as "the model's own weights"."""
    return [name for name, e in EXPLAINERS.items()
            if (capabilities.neural or not e.neural_only) and not (name == MODEL and capabilities.own_weights)]


def explain(
    ranker: Ranker, question: str, candidates: Sequence[CandidateInput], index: int, explainer: str = MODEL
) -> Explanation:
    """Candidate ``index``'s explanation by ``explainer`` (``MODEL``: the model's own, whatever
    explainer that is); ``InputError`` for one the model lacks."""
    if explainer == MODEL:
        explainer = ranker.capabilities.own_weights or MODEL
    if explainer not in available(ranker.capabilities):
        raise InputError(
            f"model {ranker.name!r} has no explainer {explainer!r}; "
            f"its explainers: {', '.join(available(ranker.capabilities))}"
        )
    return EXPLAINERS[explainer].explain(ranker, question, candidates, index)
