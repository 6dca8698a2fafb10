"""Compare-aggregate: shapes and masks, the listwise loss on hand-computed pools, question batches,
learning on the demo corpus, checkpoints and explanations (real spaCy, real GloVe)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.data.demo import load_demo
from qa_core.nn.losses import ListwiseKLLoss, PointwiseLogisticLoss
from qa_core.rankers import registry
from qa_core.rankers.compare_aggregate import (
    CompareAggregate,
    CompareAggregateConfig,
    CompareAggregateRanker,
    match_ids,
)
from qa_core.rankers.neural import token_positions
from qa_core.services.experiments import evaluate_ranker
from qa_core.text.contextual import CONTEXT_DIM, token_vectors
from qa_core.text.features import IdfTable
from qa_core.text.nlp import get_nlp, parse
from qa_core.training.listwise import QuestionBatches
from qa_core.types import InputError

QUESTION = "Who wrote the play Hamlet?"
ANSWER = "William Shakespeare wrote the play Hamlet around 1600."
SMALL = CompareAggregateConfig(hidden=8, windows=(1, 2, 3), type_dim=3, dropout=0.0)
# Every layer and channel, small enough to learn the 139 training questions of the demo corpus in
# about 2 s (held-out MAP 0.86-0.89 over seeds 1-3 against word overlap's 0.69).
FAST = dict(hidden=16, lr=0.01, max_epochs=4, patience=4, eval_every=10, batch_size=8)


def _vectors(rows: int = 40) -> torch.Tensor:
    torch.manual_seed(0)
    vectors = torch.randn(rows, 50)
    vectors[0] = 0
    return vectors


def _inputs(questions: list[list[int]], answers: list[list[int]], garbage: float = 0.0) -> dict[str, torch.Tensor]:
    """Padded ids and channel inputs; ``garbage`` fills every channel under the padding."""
    q_len, a_len = max(map(len, questions)), max(map(len, answers))
    torch.manual_seed(1)
    inputs = {
        "question": torch.tensor([q + [0] * (q_len - len(q)) for q in questions]),
        "answer": torch.tensor([a + [0] * (a_len - len(a)) for a in answers]),
        "answer_match": torch.rand(len(answers), a_len, 2),
        "answer_type": torch.randint(0, 7, (len(answers), a_len)),
        "question_context": torch.randn(len(questions), q_len, CONTEXT_DIM),
        "answer_context": torch.randn(len(answers), a_len, CONTEXT_DIM),
    }
    for row, (q, a) in enumerate(zip(questions, answers)):
        inputs["answer_match"][row, len(a) :] = garbage
        inputs["answer_type"][row, len(a) :] = int(garbage)
        inputs["question_context"][row, len(q) :] = garbage
        inputs["answer_context"][row, len(a) :] = garbage
    return inputs


# ------------------------------------------------------------------------------ shapes and masks


def test_padding_never_gets_attention_and_never_changes_a_score():
    model = CompareAggregate(_vectors(), SMALL).eval()
    alone = _inputs([[5, 9, 2]], [[7, 8, 11, 12]])
    padded = _inputs([[5, 9, 2], list(range(2, 10))], [[7, 8, 11, 12], list(range(3, 12))], garbage=3.0)
    for name in ("answer_match", "answer_type", "question_context", "answer_context"):
        padded[name][0, : alone[name].shape[1]] = alone[name][0]
    score_alone, score_padded = model(**alone), model(**padded)
    assert score_alone.shape == (1,) and score_padded.shape == (2,)
    torch.testing.assert_close(score_padded[0], score_alone[0])

    mask = padded["question"] != 0
    attention, compared = model.compare_words(
        padded["question"], padded["answer"], mask, padded["question_context"], padded["answer_context"]
    )
    assert attention.shape == (2, 9, 8) and compared.shape == (2, 9, 8)
    assert torch.all(attention[0, :, 3:] == 0)  # the padded question positions get exactly nothing
    torch.testing.assert_close(attention.sum(dim=-1), torch.ones(2, 9))


def test_channels_widen_the_aggregation_input_only_when_on():
    full = CompareAggregate(_vectors(), SMALL)
    bare = CompareAggregate(_vectors(), CompareAggregateConfig(
        hidden=8, windows=(1, 2, 3), exact_match=False, answer_type=False, contextual=False
    ))  # fmt: skip
    assert full.aggregators[0].conv.in_channels == 8 + 2 + 3 and bare.aggregators[0].conv.in_channels == 8
    assert full.gate.in_features == 50 + CONTEXT_DIM and bare.gate.in_features == 50
    assert bare.answer_type is None
    scores = bare(**{name: tensor for name, tensor in _inputs([[5, 9]], [[7, 8, 3]]).items() if name in ("question", "answer")})
    assert scores.shape == (1,)


def test_pooling_credit_covers_real_answer_words_only():
    model = CompareAggregate(_vectors(), SMALL).eval()
    inputs = _inputs([[5, 9, 2], [4, 6]], [[7, 8], list(range(3, 12))], garbage=3.0)
    with torch.inference_mode():
        q, a = inputs["question"], inputs["answer"]
        _, compared = model.compare_words(q, a, q != 0, inputs["question_context"], inputs["answer_context"])
        credit = model.pooling_credit(model.channels(compared, inputs["answer_match"], inputs["answer_type"]), a != 0)
    torch.testing.assert_close(credit.sum(dim=1), torch.ones(2, dtype=credit.dtype))
    assert torch.all(credit[0, 2:] == 0) and torch.all(credit >= 0)


def test_exact_match_features_and_spacy_token_vectors_align_with_tokens():
    q, a = parse(QUESTION), parse(ANSWER)
    idf = IdfTable.fit([["william", "wrote"], ["play", "hamlet"], ["wrote"]])
    rows = match_ids(a, q, idf, token_positions(a))
    matched = [a.tokens[i] for i, (hit, _) in zip(token_positions(a), rows) if hit]
    assert matched == ["wrote", "the", "play", "Hamlet"]  # stopwords match; "." never does
    weight = dict(zip(a.tokens, (w for _, w in rows)))
    assert weight["Hamlet"] == pytest.approx(idf.idf("hamlet") / idf.max_idf)
    assert weight["wrote"] == pytest.approx(idf.idf("wrote") / idf.max_idf) and weight["William"] == 0

    vectors = token_vectors([ANSWER])[0]
    assert vectors.shape == (len(a.tokens), CONTEXT_DIM)
    np.testing.assert_allclose(vectors, get_nlp()(ANSWER).tensor, atol=2e-3)  # float16 storage


# ------------------------------------------------------------------------------ losses and batches


def test_listwise_loss_matches_hand_computed_pools():
    scores = torch.tensor([1.0, 0.0, 2.0, 0.5, 0.5, 3.0], dtype=torch.float64)
    # pool 0: rows 0, 1 (row 0 relevant); pool 1: rows 2, 3, 4 (rows 2 and 4 relevant); pool 2: no relevant row
    targets = torch.tensor([[0, 1], [0, 0], [1, 1], [1, 0], [1, 1], [2, 0]], dtype=torch.float32)
    pool0 = -math.log(math.exp(1) / (math.exp(1) + 1))  # KL(one-hot || p) = -log p of the relevant row
    z = math.exp(2) + 2 * math.exp(0.5)
    pool1 = 0.5 * math.log(0.5 / (math.exp(2) / z)) + 0.5 * math.log(0.5 / (math.exp(0.5) / z))
    loss = ListwiseKLLoss()(scores, targets)
    assert loss.item() == pytest.approx((pool0 + pool1) / 2)  # the pool without a relevant row is not counted

    # The loss only orders a pool: shifting one pool's scores changes nothing.
    shifted = scores + torch.tensor([5.0, 5.0, -3.0, -3.0, -3.0, 0.0], dtype=torch.float64)
    assert ListwiseKLLoss()(shifted, targets).item() == pytest.approx(loss.item())
    pointwise = PointwiseLogisticLoss()(scores, targets)
    expected = torch.nn.functional.binary_cross_entropy_with_logits(scores, targets[:, 1].double())
    assert pointwise.item() == pytest.approx(expected.item())


def test_question_batches_hold_whole_pools_in_a_seeded_order():
    groups = torch.tensor([7, 7, 3, 3, 3, 9, 5, 5])
    labels = torch.tensor([1, 0, 0, 1, 0, 1, 0, 1])
    inputs = {"row": torch.arange(8)}
    batches = QuestionBatches(inputs, groups, labels, per_batch=3)
    assert batches.questions == 4 and len(batches) == 2
    epoch = list(batches(torch.Generator().manual_seed(1)))
    seen = torch.cat([batch["row"] for batch, _ in epoch]).sort().values
    assert seen.tolist() == list(range(8))
    for batch, targets in epoch:
        rows = batch["row"]
        assert targets[:, 1].tolist() == labels[rows].float().tolist()
        for pool in targets[:, 0].unique():  # one pool id <-> one question, all its rows present
            members = rows[targets[:, 0] == pool]
            assert len(groups[members].unique()) == 1
            assert len(members) == int((groups == groups[members[0]]).sum())
    again = list(batches(torch.Generator().manual_seed(1)))
    assert [b["row"].tolist() for b, _ in again] == [b["row"].tolist() for b, _ in epoch]


def test_an_unknown_loss_is_a_clear_input_error():
    with pytest.raises(InputError, match="loss must be one of"):
        registry.create("compare_aggregate", loss="hinge")


# ------------------------------------------------------------------------------ training and checkpoints


@pytest.fixture(scope="module")
def demo(single_thread):
    dataset = load_demo()
    return dataset.split("train"), dataset.split("dev"), dataset.split("test") + dataset.split("dev")


@pytest.fixture(scope="module")
def trained(demo) -> CompareAggregateRanker:
    train, dev, _ = demo
    ranker = CompareAggregateRanker(CompareAggregateRanker.configure(**FAST))
    ranker.fit(train, dev, seed=1, analyzer=QuestionAnalyzer(), progress=False)
    return ranker


def test_a_short_training_run_beats_word_overlap_on_the_demo_corpus(trained, demo):
    train, dev, held_out = demo
    overlap = registry.create("overlap")
    overlap.fit(train, dev)
    assert evaluate_ranker(trained, held_out).aggregate["map"] > evaluate_ranker(overlap, held_out).aggregate["map"]


def test_save_load_round_trip_gives_identical_scores(trained, demo, tmp_path: Path):
    pools = [(q.text, q.candidates) for q in demo[2]] + [("An unseen question about zebras?", ["Zebras are striped."])]
    restored = registry.load(registry.save(trained, tmp_path / "model.pt"))
    assert isinstance(restored, CompareAggregateRanker) and restored.config == trained.config
    assert restored.analyzer is not None and restored.analyzer.source == "heuristic"
    for before, after in zip(trained.score_pools(pools), restored.score_pools(pools)):
        np.testing.assert_array_equal(after, before)


def test_pools_score_as_single_pairs(trained, demo):
    question = demo[2][0]
    pooled = trained.score(question.text, question.candidates)
    alone = [trained.score(question.text, [candidate])[0] for candidate in question.candidates]
    np.testing.assert_allclose(pooled, alone, rtol=1e-5, atol=1e-6)


def test_explains_with_attention_comparison_weights_and_focus_links(trained):
    explanation = trained.explain(QUESTION, [ANSWER], 0)
    q_tokens, a_tokens = parse(QUESTION).tokens, parse(ANSWER).tokens
    assert len(explanation.answer_weights) == len(a_tokens) and len(explanation.question_weights) == len(q_tokens)
    assert explanation.weight_kind == "attention"
    assert sum(explanation.answer_weights) == pytest.approx(1.0, abs=1e-5)
    attention = np.array(explanation.matrices["attention"])
    comparison = np.array(explanation.matrices["comparison"])
    assert attention.shape == comparison.shape == (len(q_tokens), len(a_tokens))
    np.testing.assert_allclose(attention.sum(axis=0), 1.0, atol=1e-5)  # each answer word attends once
    assert comparison.sum() == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(comparison.sum(axis=0), explanation.answer_weights, atol=1e-6)
    np.testing.assert_allclose(comparison.sum(axis=1), explanation.question_weights, atol=1e-6)
    focus = [link for link in explanation.links if link.kind == "REL-FOCUS-HUM"]
    assert focus and {link.label for link in focus} == {"PERSON"}
    assert explanation.score == pytest.approx(trained.score(QUESTION, [ANSWER])[0], abs=1e-6)
