"""Recurrent rankers: the attention LSTM (Romeo et al. 2016) and global-local attention (Bachrach
et al. 2017), their shared blocks (LSTM reading, attention, losses, pairwise batches), and short
real training runs on the bundled demo corpus (real spaCy, real GloVe)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from qa_core.nn.attention import MLPAttention, masked_softmax
from qa_core.nn.losses import PairwiseHingeLoss, StackedCrossEntropy
from qa_core.nn.recurrent import LSTMEncoder, read_mask
from qa_core.rankers import registry
from qa_core.rankers.attention_lstm import NO_RANK, AttentionLSTMConfig, AttentionLSTMPair, AttentionLSTMRanker
from qa_core.rankers.global_local import GlobalLocalAttention, GlobalLocalConfig, GlobalLocalRanker, present_words
from qa_core.rankers.neural import model_words
from qa_core.services.experiments import evaluate_ranker
from qa_core.text.nlp import parse_many
from qa_core.text.vectors import UNK
from qa_core.training.batching import PairwiseBatches
from qa_core.types import Candidate, InputError, Question

QUESTION = "Who wrote the play Hamlet?"
POOL = [
    "The weather in Denmark is often cold and rainy, and the long winters are dark.",
    "William Shakespeare wrote the play Hamlet around 1600.",
    "Hamlet is a small village.",
    "",
]


@pytest.fixture(scope="module")
def overlap_map(demo) -> float:
    ranker = registry.create("overlap")
    ranker.fit(demo.split("train"), demo.split("dev"))
    return evaluate_ranker(ranker, demo.split("test")).aggregate["map"]


@pytest.fixture(scope="module")
def trained_attention_lstm(demo, single_thread) -> tuple[AttentionLSTMRanker, dict]:
    ranker = AttentionLSTMRanker()
    report = ranker.fit(demo.split("train"), demo.split("dev"), seed=1, progress=False)
    return ranker, report


@pytest.fixture(scope="module")
def trained_global_local(demo, single_thread) -> tuple[GlobalLocalRanker, dict]:
    # The demo's 139 training questions give 142 triples: three batches an epoch at the default 50,
    # so patience would end training after a handful of steps; 8 triples a batch gives it more.
    ranker = registry.create("global_local", batch_size=8)
    report = ranker.fit(demo.split("train"), demo.split("dev"), seed=1, progress=False)
    return ranker, report


# ---------------------------------------------------------------------------------- LSTM reading


def test_read_mask_marks_real_words_and_gives_an_empty_text_one_step():
    ids = torch.tensor([[5, 6, 0], [0, 0, 0], [7, 0, 0]])
    assert read_mask(ids).tolist() == [[True, True, False], [True, False, False], [True, False, False]]


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_final_state_is_the_last_real_words_and_padding_is_never_read(bidirectional):
    torch.manual_seed(0)
    encoder = LSTMEncoder(4, 3, bidirectional=bidirectional).double()
    words = torch.randn(2, 6, 4, dtype=torch.float64)  # non-zero "padding": it must never be read
    mask = torch.tensor([[True] * 3 + [False] * 3, [True] * 6])
    states, (hidden, cell) = encoder(words, mask)
    alone, (alone_hidden, alone_cell) = encoder.lstm(words[:1, :3])
    torch.testing.assert_close(states[0, :3], alone[0], rtol=0, atol=1e-12)
    assert torch.equal(states[0, 3:], torch.zeros(3, encoder.output_dim, dtype=torch.float64))
    torch.testing.assert_close(hidden[0], alone_hidden[:, 0].reshape(-1), rtol=0, atol=1e-12)
    torch.testing.assert_close(cell[0], alone_cell[:, 0].reshape(-1), rtol=0, atol=1e-12)
    # The forward direction's final state is the state at the last real word, not at a padding step.
    torch.testing.assert_close(hidden[0, :3], states[0, 2, :3], rtol=0, atol=1e-12)
    assert not torch.allclose(hidden[0, :3], encoder.lstm(words[:1])[0][0, 5, :3])


def test_lstm_starts_from_a_given_cell_state():
    torch.manual_seed(0)
    encoder = LSTMEncoder(4, 3).double()
    words, cell = torch.randn(2, 5, 4, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
    mask = torch.tensor([[True] * 2 + [False] * 3, [True] * 5])
    _, (hidden, _) = encoder(words, mask, initial_cell=cell)
    _, (expected, _) = encoder.lstm(words[:1, :2], (torch.zeros(1, 1, 3, dtype=torch.float64), cell[:1].unsqueeze(0)))
    torch.testing.assert_close(hidden[0], expected[0, 0], rtol=0, atol=1e-12)
    assert not torch.allclose(hidden, encoder(words, mask)[1][0])


# ---------------------------------------------------------------------------------- attention and losses


def test_masked_softmax_gives_padding_exactly_zero_and_sums_to_one():
    logits = torch.tensor([[1.0, 2.0, 50.0], [0.5, 80.0, -3.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    weights = masked_softmax(logits, mask)
    assert weights[0, 2] == 0.0
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(2))
    torch.testing.assert_close(weights[0, :2], torch.softmax(logits[0, :2], dim=0))


def test_mlp_attention_ignores_what_padding_holds():
    torch.manual_seed(0)
    attention = MLPAttention(3, 2, 5).double()
    keys, query = torch.randn(1, 4, 3, dtype=torch.float64), torch.randn(1, 2, dtype=torch.float64)
    mask = torch.tensor([[True, True, False, False]])
    other = keys.clone()
    other[0, 2:] = 100.0
    weights = attention(keys, query, mask)
    torch.testing.assert_close(weights, attention(other, query, mask), rtol=0, atol=0)
    torch.testing.assert_close(weights[0, :2], attention(keys[:, :2], query, mask[:, :2])[0], rtol=0, atol=1e-15)


def test_pairwise_hinge_loss_is_the_shifted_hinge():
    scores = torch.tensor([0.9, 0.3, 0.5, 0.4])  # positives 0.9, 0.3; their negatives 0.5, 0.4
    loss = PairwiseHingeLoss(margin=0.2)(scores, torch.ones(2))
    assert loss.item() == pytest.approx((max(0, 0.2 - 0.9 + 0.5) + max(0, 0.2 - 0.3 + 0.4)) / 2)


def test_stacked_cross_entropy_sums_each_classifiers_own_loss():
    torch.manual_seed(0)
    logits, targets = torch.randn(6, 2, 2), torch.tensor([0, 1, 1, 0, 1, 0])
    expected = F.cross_entropy(logits[:, 0], targets) + F.cross_entropy(logits[:, 1], targets)
    torch.testing.assert_close(StackedCrossEntropy()(logits, targets), expected)


# ---------------------------------------------------------------------------------- pairwise batches


def _pairwise(batch_size: int = 2) -> PairwiseBatches:
    # group 0: rows 0 (+), 1, 2; group 1: rows 3 (+), 4 (+), 5; group 2 all positive; group 3 all negative
    groups = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3])
    labels = torch.tensor([1, 0, 0, 2, 1, 0, 1, 1, 0])
    return PairwiseBatches({"row": torch.arange(9)}, groups, labels, batch_size)


def _epoch(batches: PairwiseBatches, seed: int) -> list[tuple[int, int]]:
    triples = []
    for inputs, targets in batches(torch.Generator().manual_seed(seed)):
        positives, negatives = inputs["row"].reshape(2, -1).tolist()
        assert torch.equal(targets, torch.ones(len(positives)))
        triples += list(zip(positives, negatives))
    return triples


def test_pairwise_batches_pair_each_positive_with_a_negative_of_its_question():
    batches = _pairwise()
    assert batches.triples == 3 and len(batches) == 2
    groups = batches.groups.tolist()
    for seed in range(20):
        triples = _epoch(batches, seed)
        assert sorted(p for p, _ in triples) == [0, 3, 4]  # all-positive and all-negative groups give none
        assert all(groups[p] == groups[n] and batches.labels[n] == 0 for p, n in triples)
    assert {n for seed in range(20) for p, n in _epoch(batches, seed) if p == 0} == {1, 2}  # resampled


def test_pairwise_batches_are_deterministic_under_a_seed():
    batches = _pairwise(batch_size=1)
    first = [_epoch(batches, seed) for seed in range(8)]
    assert first == [_epoch(batches, seed) for seed in range(8)]
    assert len({tuple(epoch) for epoch in first}) > 1

    generator = torch.Generator().manual_seed(3)
    epochs = [[p for p, _ in _rows(batches(generator))] for _ in range(6)]
    assert len({tuple(e) for e in epochs}) > 1  # a new order every epoch


def _rows(epoch):
    for inputs, _ in epoch:
        yield tuple(inputs["row"].tolist())


def test_pairwise_batches_check_lengths():
    with pytest.raises(ValueError, match="differ in length"):
        PairwiseBatches({"row": torch.arange(3)}, torch.tensor([0, 0]), torch.tensor([1, 0]), 2)


# ---------------------------------------------------------------------------------- networks: padding


def _random_table(rows: int = 30, dim: int = 6) -> torch.Tensor:
    torch.manual_seed(0)
    table = torch.randn(rows, dim)
    table[0] = 0.0
    return table


QUESTIONS = torch.tensor([[4, 5, 6, 0, 0, 0], [7, 8, 9, 10, 11, 12], [13, 0, 0, 0, 0, 0]])
ANSWERS = torch.tensor([[14, 5, 15, 16, 0, 0, 0, 0], [17, 18, 19, 20, 21, 22, 23, 24], [0, 0, 0, 0, 0, 0, 0, 0]])


def _unpadded(ids: torch.Tensor) -> torch.Tensor:
    length = int((ids != 0).sum())
    return ids[: max(length, 1)].unsqueeze(0)


def test_attention_lstm_scores_and_weights_do_not_depend_on_padding():
    config = AttentionLSTMConfig(hidden=5, attention_hidden=4, classifier_hidden=3, rank_slots=3, dropout=0.0)
    model = AttentionLSTMPair(_random_table(), config).double().eval()
    ranks = torch.tensor([1, NO_RANK, 3])
    logits, weights = model.attend(QUESTIONS, ANSWERS, ranks)
    assert logits.shape == (3, 2, 2)
    assert weights["question"].shape == (3, 6) and weights["answer"].shape == (3, 8)
    for row in range(3):
        q, a = _unpadded(QUESTIONS[row]), _unpadded(ANSWERS[row])
        alone_logits, alone_weights = model.attend(q, a, ranks[row : row + 1])
        torch.testing.assert_close(logits[row], alone_logits[0], rtol=0, atol=1e-12)
        for side, ids in (("question", q), ("answer", a)):
            n = ids.shape[1]
            torch.testing.assert_close(weights[side][row, :n], alone_weights[side][0], rtol=0, atol=1e-12)
            assert torch.all(weights[side][row, n:] == 0)  # padding gets no attention
            assert weights[side][row].sum().item() == pytest.approx(1.0)


def test_attention_lstm_switch_swaps_the_texts():
    config = AttentionLSTMConfig(hidden=5, attention_hidden=4, classifier_hidden=3, rank_slots=3, dropout=0.0)
    pair = AttentionLSTMPair(_random_table(), config).double().eval()
    on_question, on_answer = pair.models["question"], pair.models["answer"]
    on_answer.load_state_dict(on_question.state_dict())  # same weights, only the switch differs
    q, a, rank = pair.embedding(QUESTIONS[:1]), pair.embedding(ANSWERS[:1]), torch.tensor([1])
    q_mask, a_mask = read_mask(QUESTIONS[:1]), read_mask(ANSWERS[:1])
    logits_q, weights_q = on_question(q, q_mask, a, a_mask, rank)
    logits_a, weights_a = on_answer(a, a_mask, q, q_mask, rank)  # texts swapped back
    torch.testing.assert_close(logits_q, logits_a, rtol=0, atol=0)
    assert weights_q.shape == (1, 6) and weights_a.shape == (1, 6)
    with pytest.raises(ValueError):
        type(on_question)(6, 5, 4, 3, 3, 0.0, attend_on="both")


def test_global_local_scores_and_weights_do_not_depend_on_padding():
    config = GlobalLocalConfig(hidden=5, global_dim=4, local_dim=3, attention_dim=4, dropout=0.0)
    model = GlobalLocalAttention(_random_table(), tf_size=20, config=config).double().eval()
    with torch.no_grad():  # the word tables start at zero; give them values so they are tested
        model.global_view.normal_()
        model.question_tf_projection.normal_()
    scores, alpha = model.attend(QUESTIONS, ANSWERS)
    assert scores.shape == (3,) and alpha.shape == (3, 8)
    assert torch.all((scores >= -1 - 1e-9) & (scores <= 1 + 1e-9))
    for row in range(3):
        q, a = _unpadded(QUESTIONS[row]), _unpadded(ANSWERS[row])
        alone_scores, alone_alpha = model.attend(q, a)
        torch.testing.assert_close(scores[row], alone_scores[0], rtol=0, atol=1e-12)
        n = a.shape[1]
        torch.testing.assert_close(alpha[row, :n], alone_alpha[0], rtol=0, atol=1e-12)
        assert torch.all(alpha[row, n:] == 0)
        assert alpha[row].sum().item() == pytest.approx(1.0)


def test_present_words_counts_each_word_once_without_pad_or_unk():
    ids = torch.tensor([[5, 6, 5, UNK, 0], [UNK, UNK, 7, 7, 7]])
    assert present_words(ids).tolist() == [[True, True, False, False, False], [False, False, True, False, False]]


def test_global_local_score_is_the_cosine_of_the_joint_representations():
    """Built explicitly: o = [tf/||tf||; h/||h||] with |V|-wide TF vectors, then cos(o_q, o_a)."""
    config = GlobalLocalConfig(hidden=5, global_dim=4, local_dim=3, attention_dim=4, dropout=0.0, lambda_tf=0.5)
    model = GlobalLocalAttention(_random_table(), tf_size=20, config=config).double().eval()
    question, answer = torch.tensor([[4, 5, 5, 6, 25]]), torch.tensor([[5, 25, 9, UNK, 4, 11]])  # 25: no learned row
    score, alpha = model.attend(question, answer)

    def tf(ids: torch.Tensor) -> torch.Tensor:
        vector = torch.zeros(30, dtype=torch.float64)
        vector[[i for i in ids[0].tolist() if i not in (0, UNK)]] = 1.0
        return vector

    q_states = model.encoder(model.embedding(question).double(), read_mask(question))[0][0]
    a_states = model.encoder(model.embedding(answer).double(), read_mask(answer))[0][0]
    o_q = torch.cat([0.5 * F.normalize(tf(question), dim=0), F.normalize(q_states.mean(dim=0), dim=0)])
    o_a = torch.cat([0.5 * F.normalize(tf(answer), dim=0), F.normalize(alpha[0] @ a_states, dim=0)])
    torch.testing.assert_close(score[0], F.cosine_similarity(o_q, o_a, dim=0), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------- training on the demo corpus


def test_attention_lstm_beats_word_overlap_on_the_demo_test_split(trained_attention_lstm, demo, overlap_map):
    ranker, report = trained_attention_lstm
    test_map = evaluate_ranker(ranker, demo.split("test")).aggregate["map"]
    print(f"demo test MAP: attention LSTM {test_map:.4f}, overlap {overlap_map:.4f}; {report['seconds']} s")
    assert test_map > overlap_map


def test_global_local_beats_word_overlap_on_the_demo_test_split(trained_global_local, demo, overlap_map):
    ranker, report = trained_global_local
    test_map = evaluate_ranker(ranker, demo.split("test")).aggregate["map"]
    print(f"demo test MAP: global-local {test_map:.4f}, overlap {overlap_map:.4f}; {report['seconds']} s")
    assert test_map > overlap_map


@pytest.mark.parametrize("fixture", ["trained_attention_lstm", "trained_global_local"])
def test_save_load_gives_identical_scores_and_attention(fixture, request, tmp_path):
    ranker, _ = request.getfixturevalue(fixture)
    loaded = registry.load(registry.save(ranker, tmp_path / "model.pt"))
    assert type(loaded) is type(ranker)
    assert np.array_equal(loaded.score(QUESTION, POOL), ranker.score(QUESTION, POOL))
    before, after = ranker.explain(QUESTION, [POOL[1]], 0), loaded.explain(QUESTION, [POOL[1]], 0)
    assert before.answer_weights == after.answer_weights and before.question_weights == after.question_weights


@pytest.mark.parametrize("fixture", ["trained_attention_lstm", "trained_global_local"])
def test_a_padded_pool_scores_each_candidate_as_alone(fixture, request):
    ranker, _ = request.getfixturevalue(fixture)
    pool = ranker.score(QUESTION, POOL)
    assert pool.dtype == np.float64 and np.isfinite(pool).all()
    alone = np.array([ranker.score(QUESTION, [candidate])[0] for candidate in POOL])
    np.testing.assert_allclose(pool, alone, rtol=1e-6, atol=1e-7)


def _check_weights(tokens: list[str], weights: list[float]) -> None:
    """One weight per spaCy token, summing to 1 over the words read, 0 on whitespace tokens."""
    assert len(weights) == len(tokens)
    assert sum(weights) == pytest.approx(1.0, abs=1e-5)
    assert all(w >= 0 for w in weights)
    assert all(w == 0 for token, w in zip(tokens, weights) if not token.strip())


def test_attention_lstm_explains_both_texts_with_attention(trained_attention_lstm):
    ranker, _ = trained_attention_lstm
    explanation = ranker.explain(QUESTION, ["  William Shakespeare  wrote Hamlet."], 0)
    assert explanation.weight_kind == "attention"
    assert explanation.score == pytest.approx(ranker.score(QUESTION, ["  William Shakespeare  wrote Hamlet."])[0])
    assert any(not token.strip() for token in explanation.answer_tokens)  # whitespace tokens are kept, weight 0
    _check_weights(explanation.question_tokens, explanation.question_weights)
    _check_weights(explanation.answer_tokens, explanation.answer_weights)
    assert "hamlet" in {link.label for link in explanation.links}


def test_global_local_explains_the_answer_with_attention(trained_global_local):
    ranker, _ = trained_global_local
    explanation = ranker.explain(QUESTION, [POOL[1]], 0)
    assert explanation.weight_kind == "attention" and explanation.question_weights is None
    assert explanation.score == pytest.approx(ranker.score(QUESTION, [POOL[1]])[0])
    _check_weights(explanation.answer_tokens, explanation.answer_weights)


def test_global_local_words_unseen_in_training_keep_zero_rows(trained_global_local, demo):
    """Dev-only words are in the TF vocabulary, but no gradient ever reaches their rows."""
    ranker, _ = trained_global_local
    model = ranker.model()
    texts = [text for q in demo.split("train") for text in (q.text, *(c.text for c in q.candidates))]
    train_ids = {i for parsed in parse_many(texts) for i in ranker.vocabulary.encode(model_words(parsed))}
    rows = (model.global_view.detach().abs().sum(dim=1) + model.question_tf_projection.detach().abs().sum(dim=1)).cpu()
    unseen = [i for i in range(2, ranker.tf_size) if i not in train_ids]
    assert unseen and rows[unseen].max() == 0  # never moved
    assert rows[sorted(train_ids - {UNK})].count_nonzero() > 0  # words of the training texts learned


# ---------------------------------------------------------------------------------- first-stage ranks


def test_rank_slots_unseen_in_training_are_read_as_no_rank(trained_attention_lstm):
    ranker, _ = trained_attention_lstm
    assert ranker.rank_slots_seen == {NO_RANK}  # the demo corpus has no first-stage ranks
    records = [Candidate(f"d{i}", text, first_stage_rank=i + 1) for i, text in enumerate(POOL)]
    assert np.array_equal(ranker.score(QUESTION, records), ranker.score(QUESTION, POOL))


def test_first_stage_ranks_in_training_become_one_hot_inputs(single_thread):
    def question(qid: str, split: str) -> Question:
        texts = ["Shakespeare wrote Hamlet.", "Hamlet is a village.", "Dogs bark.", "Paris is in France."]
        candidates = [
            Candidate(f"{qid}-{i}", t, label=int(i == 0), first_stage_rank=i + 1) for i, t in enumerate(texts)
        ]
        candidates[3] = Candidate(f"{qid}-3", texts[3], label=0, first_stage_rank=40)  # beyond the slots
        return Question(qid, "Who wrote Hamlet?", candidates, split)

    ranker = registry.create("attention_lstm", max_epochs=1, hidden=8, attention_hidden=8, classifier_hidden=8)
    ranker.fit([question("t1", "train")], [question("d1", "dev")], seed=1, progress=False)
    assert ranker.rank_slots_seen == {NO_RANK, 1, 2, 3}
    pairs = ranker.pool_pairs([("Who wrote Hamlet?", [Candidate("x", "Hamlet.", first_stage_rank=r) for r in (1, 3, 5, 40)])])
    pairs += ranker.pool_pairs([("Who wrote Hamlet?", ["Hamlet."])])
    assert ranker.extra_inputs(pairs)["rank"].tolist() == [1, 3, NO_RANK, NO_RANK, NO_RANK]
    restored = AttentionLSTMRanker.from_state(ranker.state())
    assert restored.rank_slots_seen == ranker.rank_slots_seen


def test_bad_settings_and_untrainable_data_give_clear_errors():
    with pytest.raises(InputError, match="score_with"):
        registry.create("attention_lstm", score_with="mean")
    right = Candidate("a", "Shakespeare wrote Hamlet.", label=1)
    all_positive = [Question("t1", "Who wrote Hamlet?", [right], "train")]
    dev = [Question("d1", "Who wrote Hamlet?", [Candidate("b", "Shakespeare.", label=1)], "dev")]
    with pytest.raises(InputError, match="both a correct and an incorrect"):
        registry.create("global_local", max_epochs=1).fit(all_positive, dev, progress=False)


def test_score_with_picks_one_model_or_the_mean(trained_attention_lstm):
    ranker, _ = trained_attention_lstm
    logits = torch.tensor([[[0.0, 1.0], [2.0, 0.0]]])
    p_question, p_answer = torch.softmax(logits[0, 0].double(), 0)[1], torch.softmax(logits[0, 1].double(), 0)[1]
    assert ranker.relevance(logits).item() == pytest.approx(((p_question + p_answer) / 2).item())
    only = registry.create("attention_lstm", score_with="answer")
    assert only.relevance(logits).item() == pytest.approx(p_answer.item())


def test_untrained_rankers_refuse_to_score():
    from qa_core.types import NotTrainedError

    for name in ("attention_lstm", "global_local"):
        with pytest.raises(NotTrainedError):
            registry.create(name).score(QUESTION, POOL)
        with pytest.raises(NotTrainedError):
            registry.create(name).explain(QUESTION, [POOL[1]], 0)


def test_recurrent_models_are_plain_modules_on_the_ranker_device(trained_attention_lstm, trained_global_local):
    for ranker, _ in (trained_attention_lstm, trained_global_local):
        model = ranker.model()
        assert isinstance(model, nn.Module)
        assert {p.device.type for p in model.parameters()} == {torch.device(ranker.device).type}
        assert not any(p is model.embedding.weight for p in model.parameters())  # frozen GloVe
