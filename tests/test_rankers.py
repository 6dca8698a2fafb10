"""Rankers: baselines on a hand-made pool, SM-CNN structure, checkpoints (real spaCy, real GloVe)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from qa_core.data.demo import load_demo
from qa_core.nn.encoders import ConvEncoder, WordEmbedding
from qa_core.rankers import registry
from qa_core.rankers.neural import NeuralRanker
from qa_core.rankers.smcnn import SMCNN, SMCNNConfig, SMCNNRanker
from qa_core.text.nlp import parse_many
from qa_core.training.loop import weight_decay_groups
from qa_core.types import Candidate, NotTrainedError, Question

QUESTION = "Who wrote the play Hamlet?"
POOL = [
    "The weather in Denmark is often cold and rainy.",
    "William Shakespeare wrote the play Hamlet around 1600.",
    "Hamlet is a small village.",
]
EXPECTED_ORDER = [1, 2, 0]


def _tiny_dataset() -> tuple[list[Question], list[Question]]:
    """Two questions per split, each with one right and two wrong answers."""

    def question(qid: str, text: str, right: str, wrong: list[str], split: str) -> Question:
        candidates = [Candidate(f"{qid}-0", right, label=1)]
        candidates += [Candidate(f"{qid}-{i}", text, label=0) for i, text in enumerate(wrong, start=1)]
        return Question(qid, text, candidates, split)

    train = [
        question("t1", "Who wrote Hamlet?", "Shakespeare wrote Hamlet in 1600.", ["Paris is in France.", "Dogs bark."], "train"),
        question("t2", "What is the capital of France?", "Paris is the capital of France.",
                 ["Shakespeare was a poet.", "Cats sleep a lot."], "train"),
    ]
    dev = [
        question("d1", "Who painted the Mona Lisa?", "Leonardo da Vinci painted the Mona Lisa.",
                 ["Rome is old.", "The Mona is a river."], "dev"),
    ]
    return train, dev


@pytest.fixture(scope="module")
def trained_smcnn() -> SMCNNRanker:
    train, dev = _tiny_dataset()
    ranker = SMCNNRanker(SMCNNConfig(max_epochs=2))
    ranker.fit(train, dev, seed=1, progress=False)
    return ranker


# ---------------------------------------------------------------------------------- baselines


@pytest.mark.parametrize("name", ["bm25", "overlap"])
def test_baseline_ranks_the_hand_made_pool(name):
    ranker = registry.create(name)
    scores = ranker.score(QUESTION, POOL)
    assert scores.dtype == np.float64 and scores.shape == (3,)
    assert [r.index for r in ranker.rank(QUESTION, POOL)] == EXPECTED_ORDER


@pytest.mark.parametrize("name", ["bm25", "overlap"])
def test_baseline_explains_with_matched_token_weights_and_links(name):
    explanation = registry.create(name).explain(QUESTION, POOL, 1)  # IDF from the pool, as its score
    tokens, weights = explanation.answer_tokens, explanation.answer_weights
    assert len(weights) == len(tokens)
    by_token = dict(zip(tokens, weights))
    assert by_token["Hamlet"] > 0 and by_token["play"] > 0
    assert by_token["William"] == 0 and by_token["1600"] == 0
    assert {"hamlet", "write", "play"} <= {link.label for link in explanation.links}


def test_bm25_word_shares_add_up_to_the_score_on_every_demo_candidate():
    """A term the answer or the question repeats is counted once in the words' sum, as in the score
    (demo-12-5's words once summed to 0.8816 for a score of 0.6374: "president" twice in the answer)."""
    bm25, demo = registry.create("bm25"), load_demo()
    parse_many([text for question in demo.questions for text in (question.text, *(c.text for c in question.candidates))])
    off = {
        (question.qid, candidate.doc_id): (sum(explanation.answer_weights), explanation.score)
        for question in demo.questions
        for index, candidate in enumerate(question.candidates)
        if abs(sum((explanation := bm25.explain(question.text, question.candidates, index)).answer_weights)
               - explanation.score) > 1e-6
    }
    assert off == {}


def test_overlap_fit_learns_idf_from_the_training_texts():
    train, dev = _tiny_dataset()
    ranker = registry.create("overlap")
    ranker.fit(train, dev)
    restored = type(ranker).from_state(ranker.state())
    assert np.array_equal(ranker.score(QUESTION, POOL), restored.score(QUESTION, POOL))
    assert [r.index for r in ranker.rank(QUESTION, POOL)][0] == 1


# ---------------------------------------------------------------------------------- checkpoints


def test_every_registered_ranker_round_trips_through_a_checkpoint(tmp_path, trained_smcnn):
    train, dev = _tiny_dataset()
    for name in registry.available():
        ranker = trained_smcnn if name == "smcnn" else registry.create(name)
        if ranker.capabilities.trainable and name != "smcnn":
            ranker.fit(train, dev, seed=1, progress=False)
        loaded = registry.load(registry.save(ranker, tmp_path / f"{name}.pt"))
        assert type(loaded) is type(ranker)
        assert np.array_equal(loaded.score(QUESTION, POOL), ranker.score(QUESTION, POOL)), name


def test_every_neural_ranker_honours_trainable_embeddings():
    """The setting is in every neural config, so every network must read it (two once ignored
    it): each model is trained for an epoch with the opposite of its default."""
    train, dev = _tiny_dataset()
    neural = [name for name in registry.available() if issubclass(registry.ranker_class(name), NeuralRanker)]
    assert len(neural) >= 5
    for name in neural:
        trainable = not registry.ranker_class(name).config_class().trainable_embeddings
        ranker = registry.create(name, trainable_embeddings=trainable, max_epochs=1)
        ranker.fit(train, dev, seed=1, progress=False)
        embedding = ranker.model().embedding
        assert embedding.trainable is trainable, name
        assert any(embedding.weight is p for p in ranker.model().parameters()) is trainable, name


def test_untrained_smcnn_refuses_to_score(tmp_path):
    ranker = registry.create("smcnn")
    with pytest.raises(NotTrainedError, match="train"):
        ranker.score(QUESTION, POOL)
    with pytest.raises(NotTrainedError):
        ranker.explain(QUESTION, [POOL[1]], 0)
    with pytest.raises(NotTrainedError):
        registry.save(ranker, tmp_path / "never.pt")


# ---------------------------------------------------------------------------------- ConvEncoder


def test_conv_encoder_is_wide():
    encoder = ConvEncoder(dim=50, filters=100, width=5)
    words = torch.randn(1, 7, 50)
    assert encoder.feature_maps(words, torch.ones(1, 7, dtype=torch.bool)).shape == (1, 100, 7 + 5 - 1)


def test_padding_never_wins_the_max():
    """Weights chosen so that a padding-only column (ReLU(bias) = 1) beats every real one (0.5)."""
    torch.manual_seed(0)
    encoder = ConvEncoder(dim=4, filters=3, width=3).double()
    nn.init.constant_(encoder.conv.weight, 0.125)
    nn.init.constant_(encoder.conv.bias, 1.0)
    embedding = WordEmbedding(torch.cat([torch.zeros(1, 4), -torch.ones(3, 4)]))  # PAD, then 3 words
    alone = torch.tensor([[1, 2, 3]])
    padded = torch.tensor([[1, 2, 3, 0, 0, 0, 0, 0], [2, 2, 2, 2, 2, 2, 2, 2]])

    def encode(ids: torch.Tensor) -> torch.Tensor:
        return encoder(embedding(ids).double(), ids != 0)

    assert torch.equal(encode(padded)[0], encode(alone)[0])
    assert torch.equal(encode(alone)[0], torch.full((3,), 0.5, dtype=torch.float64))


def test_padding_does_not_change_a_random_encoding():
    torch.manual_seed(1)
    encoder = ConvEncoder(dim=50, filters=100, width=5).double()
    embedding = WordEmbedding(torch.randn(10, 50))
    alone = torch.tensor([[3, 4, 5, 6]])
    padded = torch.tensor([[3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0], [2] * 11])
    vectors = [encoder(embedding(ids).double(), ids != 0)[0] for ids in (alone, padded)]
    assert torch.equal(*vectors)


# ---------------------------------------------------------------------------------- SM-CNN structure


def test_smcnn_parameter_count_matches_the_paper_scale():
    model = SMCNN(torch.randn(1000, 50), SMCNNConfig())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    conv, join = 100 * 50 * 5 + 100, 2 * 100 + 1 + 4  # join: both sentences, their similarity, 4 overlap features
    assert trainable == 2 * conv + 100 * 100 + (join * join + join) + (join * 2 + 2) == 102_842
    assert model.question_encoder is not model.answer_encoder
    assert model.similarity.shape == (100, 100)
    assert model.embedding.weight.requires_grad is False
    assert not any(p is model.embedding.weight for p in model.parameters())


def test_smcnn_l2_groups_have_the_two_strengths():
    model = SMCNN(torch.randn(1000, 50), SMCNNConfig())
    groups = weight_decay_groups(model, default=1e-4, by_module_type={nn.Conv1d: 1e-5})
    by_decay = {group["weight_decay"]: {id(p) for p in group["params"]} for group in groups}
    conv = {id(p) for encoder in (model.question_encoder, model.answer_encoder) for p in encoder.parameters()}
    assert set(by_decay) == {1e-5, 1e-4}
    assert by_decay[1e-5] == conv
    assert by_decay[1e-4] == {id(p) for p in model.parameters()} - conv
    assert id(model.similarity) in by_decay[1e-4]


def test_smcnn_scores_are_probabilities_and_explain_gives_saliency(trained_smcnn):
    scores = trained_smcnn.score(QUESTION, POOL)
    assert scores.dtype == np.float64 and ((scores > 0) & (scores < 1)).all()
    pools = trained_smcnn.score_pools([(QUESTION, POOL), ("Who painted it?", POOL[:2]), ("Empty pool?", [])])
    assert [len(p) for p in pools] == [3, 2, 0]
    np.testing.assert_allclose(pools[0], scores, rtol=1e-5)

    explanation = trained_smcnn.explain(QUESTION, [POOL[1]], 0)
    assert explanation.weight_kind == "saliency"
    assert explanation.score == pytest.approx(scores[1], rel=1e-5)
    assert len(explanation.answer_weights) == len(explanation.answer_tokens)
    assert len(explanation.question_weights) == len(explanation.question_tokens)
    assert all(w >= 0 for w in explanation.answer_weights) and max(explanation.answer_weights) > 0
    similarity = np.array(explanation.matrices["similarity"])
    assert similarity.shape == (len(explanation.question_tokens), len(explanation.answer_tokens))
    hamlet_q, hamlet_a = explanation.question_tokens.index("Hamlet"), explanation.answer_tokens.index("Hamlet")
    assert similarity[hamlet_q, hamlet_a] == pytest.approx(1.0)
    assert "hamlet" in {link.label for link in explanation.links}


def test_frozen_table_is_open_vocabulary_and_growth_moves_no_score(trained_smcnn):
    """A word unseen in training gets its GloVe row at scoring time; earlier scores stay put."""
    from qa_core.text.vectors import glove_vectors

    copy = type(trained_smcnn).from_state(trained_smcnn.state())  # the fixture stays as trained
    before = copy.score(QUESTION, POOL)
    assert "zeppelin" not in copy.vocabulary
    copy.score("Who flew the zeppelin?", ["The zeppelin flew over Hamlet."])
    assert "zeppelin" in copy.vocabulary
    row = copy.model().embedding.weight[copy.vocabulary.index["zeppelin"]].cpu().numpy()
    np.testing.assert_array_equal(row, glove_vectors(["zeppelin"])["zeppelin"])
    assert np.array_equal(copy.score(QUESTION, POOL), before)
    copy.score("What is qqxqzzv?", ["qqxqzzv is not a word."])
    assert "qqxqzzv" not in copy.vocabulary  # GloVe does not know it: UNK


def test_candidate_records_score_like_their_texts(trained_smcnn):
    records = [Candidate(f"d{i}", text, first_stage_rank=i + 1) for i, text in enumerate(POOL)]
    assert np.array_equal(trained_smcnn.score(QUESTION, records), trained_smcnn.score(QUESTION, POOL))


def test_split_by_sizes_gives_one_array_per_pool_including_empty_ones():
    from qa_core.rankers.base import split_by_sizes

    parts = split_by_sizes(np.arange(5.0), [2, 0, 3])
    assert [p.tolist() for p in parts] == [[0.0, 1.0], [], [2.0, 3.0, 4.0]]
    assert split_by_sizes(np.zeros(0), []) == []


def test_a_discovery_cut_short_finishes_on_the_next_listing():
    """A Streamlit rerun can stop the first model listing half-way through the imports: the next
    discovery finds the classes already registered again and finishes instead of failing."""
    names = registry.available()
    registry._discover.__wrapped__()  # the uncached discovery again, over what is registered already
    assert registry.available() == names
