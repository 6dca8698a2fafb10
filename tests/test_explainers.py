"""Explainers (qa_core.explain, qa_core.nn.attribution): Captum's attributions against values worked
out by hand on a tiny network, the substitution that feeds embedded words through a real ranker's
forward, word occlusion through ``score_edits``, and which explainers a model's capabilities offer."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from qa_core.explain import explainers
from qa_core.nn import attribution
from qa_core.nn.attribution import EmbeddedInputs
from qa_core.rankers import registry
from qa_core.rankers.baselines import WordOverlapRanker
from qa_core.rankers.occlusion import WordOcclusion, occlude
from qa_core.rankers.smcnn import SMCNNConfig, SMCNNRanker
from qa_core.services import explaining
from qa_core.services.ranking import rank_pool
from qa_core.types import Candidate, InputError, Question

QUESTION = "Who wrote the play Hamlet?"
ANSWER = "William Shakespeare wrote the play Hamlet around 1600."

# Two question words and three answer words of dimension 2; w weighs the answer, v the question.
Q_WORDS = torch.tensor([[[1.0, 2.0], [0.5, -1.0]]])
A_WORDS = torch.tensor([[[1.0, 0.0], [2.0, 1.0], [-1.0, 3.0]]])
V = torch.tensor([0.5, 0.25])
W = torch.tensor([1.0, -0.5])


def tiny(square: bool) -> EmbeddedInputs:
    """s = sum_j q_j.v + sum_j a_j.w, scored as s (linear) or s^2."""

    def forward(q: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        s = (q @ V).sum(dim=1) + (a @ W).sum(dim=1)
        return s**2 if square else s

    return EmbeddedInputs((Q_WORDS, A_WORDS), forward)


# Each word's share c_j = x_j . weight: question 1.0, 0.0; answer 1.0, 1.5, -2.5; s = 1.0.
Q_SHARES, A_SHARES, S = [1.0, 0.0], [1.0, 1.5, -2.5], 1.0


def test_captum_methods_match_hand_computed_attributions_of_a_linear_score():
    """For a linear score, IG from zeros, gradient x input and occlusion each give c_j exactly."""
    ig, delta = attribution.integrated_gradients(tiny(square=False))
    for values in (ig, attribution.gradient_x_input(tiny(square=False)), attribution.embedding_occlusion(tiny(False))):
        assert values[0] == pytest.approx(Q_SHARES, abs=1e-6)
        assert values[1] == pytest.approx(A_SHARES, abs=1e-6)
    assert delta < 1e-6


def test_captum_methods_match_hand_computed_attributions_of_a_squared_score():
    """f = s^2: IG gives s * c_j (the path integral of 2 alpha s c_j), gradient x input 2 s c_j,
    occlusion s^2 - (s - c_j)^2; the gradient norm is |2 s| * |weight vector|."""
    ig, _ = attribution.integrated_gradients(tiny(square=True))
    assert ig[1] == pytest.approx([S * c for c in A_SHARES], abs=1e-5)
    assert attribution.gradient_x_input(tiny(True))[1] == pytest.approx([2 * S * c for c in A_SHARES], abs=1e-6)
    assert attribution.embedding_occlusion(tiny(True))[1] == pytest.approx(
        [S**2 - (S - c) ** 2 for c in A_SHARES], abs=1e-6
    )
    (q_norms, a_norms), score = attribution.gradient_norm(tiny(True))
    assert a_norms == pytest.approx([2 * S * float(W.norm())] * 3, abs=1e-6)
    assert q_norms == pytest.approx([2 * S * float(V.norm())] * 2, abs=1e-6)
    assert score == tiny(True).score() == pytest.approx(S**2)  # the differentiated pass's score


@pytest.fixture(scope="module")
def smcnn() -> SMCNNRanker:
    train = [
        Question("t1", "Who wrote Hamlet?", [Candidate("a", "Shakespeare wrote Hamlet.", label=1),
                                             Candidate("b", "Paris is in France.", label=0)], "train"),
    ]
    dev = [
        Question("d1", "Who painted the Mona Lisa?", [Candidate("c", "Leonardo painted the Mona Lisa.", label=1),
                                                      Candidate("d", "Rome is old.", label=0)], "dev"),
    ]
    ranker = SMCNNRanker(SMCNNConfig(max_epochs=1))
    ranker.fit(train, dev, seed=1, progress=False)
    return ranker


def test_embedded_pair_scores_through_the_rankers_own_forward(smcnn):
    """The substituted embedding reproduces the ranked score, zeroed answer words change it, and
    Integrated Gradients' attributions add up to score minus the all-zero score (completeness)."""
    pair = smcnn.embedded_pair(QUESTION, ["Paris is nice.", ANSWER], 1)
    score = float(smcnn.score(QUESTION, [ANSWER])[0])
    assert pair.embedded.score() == pytest.approx(score, rel=1e-6)
    q, a = pair.embedded.inputs
    with torch.no_grad():
        zeroed = float(pair.embedded.forward(torch.zeros_like(q), torch.zeros_like(a)))
        assert float(pair.embedded.forward(q, torch.zeros_like(a))) != pytest.approx(score, rel=1e-6)
    (q_ig, a_ig), delta = attribution.integrated_gradients(pair.embedded, steps=64)
    assert sum(q_ig) + sum(a_ig) == pytest.approx(score - zeroed, abs=max(1e-4, 2 * delta))
    assert len(a_ig) == len(pair.answer_positions) == 9  # eight words and the full stop


def test_neural_explainers_keep_the_models_explanation_and_replace_its_weights(smcnn):
    own = smcnn.explain(QUESTION, [ANSWER], 0)
    for name in ("integrated_gradients", "gradient_x_input", "embedding_occlusion"):
        shown = explainers.explain(smcnn, QUESTION, [ANSWER], 0, name)
        assert shown.score == own.score and shown.answer_tokens == own.answer_tokens
        assert shown.matrices == own.matrices and shown.weight_kind != own.weight_kind
        assert len(shown.answer_weights) == len(own.answer_tokens) and any(shown.answer_weights)


def test_word_occlusion_is_the_score_drop_of_each_deleted_word():
    ranker = registry.create("overlap")
    pool = ["The weather is cold.", ANSWER]
    shown = explainers.explain(ranker, QUESTION, pool, 1, "occlusion")
    tokens = shown.answer_tokens
    words = [i for i, t in enumerate(tokens) if t.strip()]
    full = ranker.score_edits(QUESTION, pool, 1, [" ".join(tokens[i] for i in words)])[0]
    for position in words:
        kept = " ".join(tokens[i] for i in words if i != position)
        expected = full - ranker.score_edits(QUESTION, pool, 1, [kept])[0]
        assert shown.answer_weights[position] == pytest.approx(expected, abs=1e-9)
    assert shown.answer_weights[tokens.index("Hamlet")] > 0 and shown.answer_weights[tokens.index("1600")] == 0


class CountingOverlap(WordOverlapRanker):
    """The overlap baseline counting the pools it scores (an occlusion edit is one pool: the model is
    pool-dependent)."""

    def __init__(self) -> None:
        super().__init__()
        self.scored = 0

    def score_pools(self, pools):
        self.scored += len(pools)
        return super().score_pools(pools)


@pytest.mark.parametrize("answer", ["", "   "])
def test_an_answer_without_words_costs_its_occlusion_one_scoring_or_none(answer):
    """Its own text only where the caller has no score (a service's own explanation), nothing beyond
    the model's own explanation for the occlusion explainer; every weight 0 and the score its pool
    score, as when its joined words were scored too. An answer with words: each deletion and its
    joined words, its explanation's score not asked again."""
    ranker = CountingOverlap()
    pool = [ANSWER, answer]
    own = ranker.explain(QUESTION, pool, 1)
    zeros, pooled = [0.0] * len(own.answer_tokens), ranker.score(QUESTION, pool)[1]
    ranker.scored = 0
    occluded = occlude(ranker, QUESTION, pool, 1, own.answer_tokens)
    assert ranker.scored == 1 and occluded == WordOcclusion(pooled, zeros)
    ranker.scored = 0
    shown = explainers.explain(ranker, QUESTION, pool, 1, "occlusion")
    assert ranker.scored == 0 and (shown.score, shown.answer_weights) == (own.score, zeros)
    worded = explainers.explain(ranker, QUESTION, pool, 0, "occlusion")
    assert ranker.scored == 1 + sum(1 for token in worded.answer_tokens if token.strip())


def test_explainers_follow_declared_capabilities():
    bm25 = registry.ranker_class("bm25").capabilities
    assert explainers.available(bm25) == ["model", "occlusion"]
    assert "integrated_gradients" in explainers.available(registry.ranker_class("smcnn").capabilities)
    with pytest.raises(InputError, match="no explainer 'integrated_gradients'; its explainers: model, occlusion"):
        explainers.explain(registry.create("bm25"), QUESTION, [ANSWER], 0, "integrated_gradients")


def test_a_counterfactual_edit_is_explained_by_the_picked_explainer():
    """The edited text's heatmap sits below the original's: both by the explainer picked (the edit
    was once always explained by the model's own weights, whatever the picker said)."""
    ranker = registry.create("bm25")  # its default (chosen on DEV) is occlusion
    pool = [Candidate("d0", "The weather is cold."), Candidate("d1", ANSWER), Candidate("d2", "Hamlet is a play.")]
    result = rank_pool(ranker, QUESTION, pool)
    edit = "Shakespeare wrote Hamlet, a play, and the play Macbeth."  # "play" twice: shares differ
    target = result.at(1)
    edited_pool = [replace(c, text=edit) if i == target.index else c for i, c in enumerate(pool)]
    weights = {}
    for name in ("model", "occlusion"):
        edited = result.counterfactual(1, edit, name)
        weights[name] = edited.explanation.answer_weights
        assert edited.explainer == name
        assert weights[name] == explainers.explain(ranker, QUESTION, edited_pool, target.index, name).answer_weights
    assert weights["model"] != weights["occlusion"]
    assert result.counterfactual(1, edit).explainer == explaining.default_explainer(ranker) == "occlusion"
