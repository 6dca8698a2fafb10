"""CNN_WO+SO / CNN_WO and MP-HCNN: input features, masking, learning on the demo corpus,
checkpoints, explanations (real spaCy, real GloVe)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from qa_core.classifiers.analysis import QuestionAnalysis, QuestionAnalyzer
from qa_core.classifiers.focus import FocusConfig, FocusTagger
from qa_core.classifiers.question_class import QuestionClassConfig, QuestionClassifier
from qa_core.data.demo import load_demo
from qa_core.rankers import registry
from qa_core.rankers.cnn_overlap import (
    CNNOverlapConfig,
    CNNOverlapRanker,
    OverlapCNN,
    answer_semantic_ids,
    overlap_ids,
    question_semantic_ids,
)
from qa_core.rankers.mphcnn import MPHCNN, HierarchicalEncoder, MPHCNNConfig, MPHCNNRanker, match_matrix
from qa_core.rankers.neural import token_positions
from qa_core.services.experiments import evaluate_ranker
from qa_core.text.nlp import parse
from qa_core.text.trigrams import text_trigrams, url_words, word_trigrams
from qa_core.types import Candidate, Question

QUESTION = "Who wrote the play Hamlet?"
ANSWER = "William Shakespeare wrote the play Hamlet around 1600."

# Small but complete settings: every layer of each architecture, a learning rate that learns the
# demo corpus in a few epochs (the papers' rates are for tens of thousands of pairs).
FAST_CNN = dict(analysis="heuristic", lr=1e-3, max_epochs=8, patience=8, filters=50)
FAST_MPHCNN = dict(filters=16, max_epochs=6, patience=6, max_answer_chars=150, optimizer="sgd", lr=0.1)


def _vectors(rows: int = 40) -> torch.Tensor:
    torch.manual_seed(0)
    vectors = torch.randn(rows, 50)
    vectors[0] = 0
    return vectors


# ------------------------------------------------------------------------------ input features


def test_character_trigrams_of_words_texts_and_urls():
    assert word_trigrams("hello") == ["#he", "hel", "ell", "llo", "lo#"]
    assert word_trigrams("a") == ["#a#"] and word_trigrams("") == []
    trigrams, owners = text_trigrams(["to", "be"])
    assert trigrams == ["#to", "to#", "#be", "be#"] and owners == [0, 0, 1, 1]
    assert text_trigrams(["hello", "world"], cap=6) == (["#he", "hel", "ell", "llo", "lo#", "#wo"], [0] * 5 + [1])
    assert url_words("http://bbc.co.uk/world-service-2011.html") == ["http", "bbc", "co", "uk", "world", "service", "0000", "html"]
    assert url_words(None) == url_words("  ") == ["<URL>"]
    assert len("".join(url_words("http://x.org/" + "a" * 500))) <= 120


def test_word_and_semantic_overlap_ids_follow_the_thesis():
    q, a = parse(QUESTION), parse(ANSWER)
    q_pos, a_pos = token_positions(q), token_positions(a)
    analysis = QuestionAnalyzer().analyse(q)  # rules: "who" -> HUM, the focus is "Who"
    assert (analysis.qclass, analysis.focus, analysis.class_id) == ("HUM", 0, 4)
    # WO: content words in both texts ("wrote", "play", "Hamlet"); stopwords and "?" never.
    assert overlap_ids(q, a, q_pos) == [0, 1, 0, 1, 1, 0]
    assert [a.tokens[i] for i, flag in zip(a_pos, overlap_ids(a, q, a_pos)) if flag] == ["wrote", "play", "Hamlet"]
    # SO: the focus word and the PERSON entity get HUM's id; a DATE does not fit HUM.
    assert question_semantic_ids(analysis, q_pos) == [4, 0, 0, 0, 0, 0]
    so = answer_semantic_ids(a, analysis, a_pos)
    assert [a.tokens[i] for i, value in zip(a_pos, so) if value == 4] == ["William", "Shakespeare"]
    as_number = QuestionAnalysis("NUM", 0, (0, 1))
    assert [a.tokens[i] for i, value in zip(a_pos, answer_semantic_ids(a, as_number, a_pos)) if value] == ["around", "1600"]
    assert answer_semantic_ids(a, QuestionAnalysis(None, None, None), a_pos) == [0] * len(a_pos)


# ------------------------------------------------------------------------------ shapes and masking


def test_overlap_cnn_scores_do_not_depend_on_padding():
    model = OverlapCNN(_vectors(), CNNOverlapConfig()).eval()
    q, a = [5, 9, 2], [7, 8, 11, 12]
    q_wo, a_wo, q_so, a_so = [1, 0, 0], [0, 1, 0, 0], [4, 0, 0], [0, 4, 4, 0]

    def batch(*rows):
        return torch.tensor([list(r) for r in rows])

    alone = model(batch(q), batch(a), batch(q_wo), batch(a_wo), batch(q_so), batch(a_so))
    padded = model(
        batch(q + [0] * 6, list(range(2, 11))),
        batch(a + [0] * 3, list(range(3, 10))),
        batch(q_wo + [1] * 6, [0] * 9),  # feature values under padding must not matter either
        batch(a_wo + [1] * 3, [0] * 7),
        batch(q_so + [3] * 6, [0] * 9),
        batch(a_so + [3] * 3, [0] * 7),
    )
    assert alone.shape == (1, 2)
    torch.testing.assert_close(padded[0], alone[0])
    without_so = OverlapCNN(_vectors(), CNNOverlapConfig(semantic_overlap=False))
    assert without_so.semantic is None
    assert without_so.question_encoder.conv.in_channels == 55 and model.question_encoder.conv.in_channels == 60


def test_hierarchical_levels_keep_length_and_ignore_padding():
    encoder = HierarchicalEncoder(dim=50, filters=8, width=4, layers=4)
    embedded = torch.randn(1, 5, 50)
    levels = encoder(embedded, torch.ones(1, 5, dtype=torch.bool))
    assert [tuple(level.shape) for level in levels] == [(1, 5, 50)] + [(1, 5, 8)] * 4
    padded = torch.cat([embedded, torch.randn(1, 3, 50)], dim=1)  # garbage under the mask
    mask = torch.tensor([[True] * 5 + [False] * 3])
    for short, long in zip(levels, encoder(padded, mask)):
        torch.testing.assert_close(long[:, :5], short)
        assert torch.all(long[:, 5:] == 0)


def test_match_matrix_gives_padding_no_mass():
    query, doc = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
    mask = torch.tensor([[True] * 4 + [False] * 2, [False] * 6])
    matches = match_matrix(query, doc, mask)
    torch.testing.assert_close(matches[0].sum(dim=-1), torch.ones(3))
    assert torch.all(matches[0, :, 4:] == 0)
    assert torch.all(matches[1] == 0)  # a document with no term: no evidence, and no NaN


@pytest.mark.parametrize("urls", [False, True])
def test_mphcnn_scores_do_not_depend_on_padding(urls):
    config = MPHCNNConfig(filters=8, max_question_len=6, max_question_chars=12)
    model = MPHCNN(_vectors(), trigrams=30, config=config, url_perspective=urls).eval()
    one = {
        "question": [3, 4, 5], "answer": [6, 7, 8, 9], "question_idf": [1.0, 2.0, 0.5],
        "question_chars": [2, 3, 4, 5, 6], "question_char_idf": [1.0, 1.0, 2.0, 0.3, 0.2],
        "answer_chars": [7, 8, 9, 10, 11, 12, 13],
    }  # fmt: skip
    other = {
        "question": [3, 4, 5, 6, 7, 8], "answer": list(range(2, 12)), "question_idf": [1.0] * 6,
        "question_chars": list(range(2, 14)), "question_char_idf": [0.5] * 12, "answer_chars": list(range(2, 22)),
    }  # fmt: skip
    if urls:
        one["url_chars"], other["url_chars"] = [14, 15, 16], list(range(2, 10))

    def tensor(rows, name):
        width = max(len(r) for r in rows)
        dtype = torch.float32 if name.endswith("idf") else torch.long
        return torch.tensor([list(r) + [0] * (width - len(r)) for r in rows], dtype=dtype)

    alone = model(**{name: tensor([values], name) for name, values in one.items()})
    together = model(**{name: tensor([one[name], other[name]], name) for name in one})
    torch.testing.assert_close(together[0], alone[0])
    features = model.evidence(**{name: tensor([values], name) for name, values in one.items()})
    perspectives = 3 if urls else 2
    assert features.shape == (1, 10 * 6 + 10 * 12 * (perspectives - 1))
    # Question padding (positions 3.. of the words, 5.. of the trigrams) carries no evidence.
    per_level = features[0, : 10 * 6].reshape(10, 6)
    assert torch.all(per_level[:, 3:] == 0) and torch.all(per_level[:, :3] > 0)


# ------------------------------------------------------------------------------ training and checkpoints


@pytest.fixture(scope="module")
def demo():
    dataset = load_demo()
    return dataset.split("train"), dataset.split("dev"), dataset.split("test") + dataset.split("dev")


@pytest.fixture(scope="module")
def overlap_map(demo) -> float:
    train, dev, held_out = demo
    ranker = registry.create("overlap")
    ranker.fit(train, dev)
    return evaluate_ranker(ranker, held_out).aggregate["map"]


@pytest.fixture(scope="module")
def trained_cnn(demo) -> CNNOverlapRanker:
    train, dev, _ = demo
    ranker = registry.create("cnn_wo_so", **FAST_CNN)
    ranker.fit(train, dev, seed=1, progress=False)
    return ranker


@pytest.fixture(scope="module")
def trained_mphcnn(demo) -> MPHCNNRanker:
    train, dev, _ = demo
    ranker = registry.create("mphcnn", **FAST_MPHCNN)
    ranker.fit(train, dev, seed=1, progress=False)
    return ranker


def test_cnn_wo_so_beats_word_overlap_on_the_demo_corpus(trained_cnn, demo, overlap_map):
    assert trained_cnn.analyzer is not None and trained_cnn.analyzer.source == "heuristic"
    assert evaluate_ranker(trained_cnn, demo[2]).aggregate["map"] > overlap_map


def test_mphcnn_beats_word_overlap_on_the_demo_corpus(trained_mphcnn, demo, overlap_map):
    assert trained_mphcnn.url_perspective is False  # the demo candidates have no URL
    assert trained_mphcnn.model().embedding.trainable
    assert evaluate_ranker(trained_mphcnn, demo[2]).aggregate["map"] > overlap_map


def _tiny_analyzer() -> QuestionAnalyzer:
    """Untrained but complete classifiers (seeded weights): enough to check they travel in a checkpoint."""
    classifier = QuestionClassifier(QuestionClassConfig(filters=8, hidden=8))
    classifier._init_model([["who", "wrote", "hamlet"], ["where", "is", "rome"]], seed=1)
    tagger = FocusTagger(FocusConfig(filters=8, hidden=8, layers=2, width=3))
    tagger._init_model([["who", "wrote", "hamlet"]], seed=1)
    return QuestionAnalyzer(classifier, tagger)


def test_cnn_wo_so_checkpoint_carries_the_classifiers(demo, tmp_path: Path):
    train, dev, held_out = demo
    analyzer = _tiny_analyzer()
    ranker = registry.create("cnn_wo_so", **{**FAST_CNN, "analysis": "auto", "max_epochs": 1})
    ranker.fit(train[:6], dev[:3], seed=2, analyzer=analyzer, progress=False)
    pools = [(q.text, q.candidates) for q in held_out[:4]]
    restored = registry.load(registry.save(ranker, tmp_path / "cnn.pt"))
    assert isinstance(restored, CNNOverlapRanker) and restored.analyzer.source == "classifiers"
    questions = [parse(q.text) for q in held_out[:4]]
    assert restored.analyzer.analyse_many(questions) == analyzer.analyse_many(questions)
    for before, after in zip(ranker.score_pools(pools), restored.score_pools(pools)):
        np.testing.assert_array_equal(after, before)


@pytest.mark.parametrize("fixture", ["trained_cnn", "trained_mphcnn"])
def test_save_load_round_trip_gives_identical_scores(fixture, demo, tmp_path: Path, request):
    ranker = request.getfixturevalue(fixture)
    pools = [(q.text, q.candidates) for q in demo[2]] + [("An unseen question about zebras?", ["Zebras are striped."])]
    restored = registry.load(registry.save(ranker, tmp_path / "model.pt"))
    assert type(restored) is type(ranker) and restored.config == ranker.config
    for before, after in zip(ranker.score_pools(pools), restored.score_pools(pools)):
        np.testing.assert_array_equal(after, before)


def test_padded_batches_score_as_single_pairs(trained_cnn, trained_mphcnn, demo):
    question = demo[2][0]
    for ranker in (trained_cnn, trained_mphcnn):
        pooled = ranker.score(question.text, question.candidates)
        alone = [ranker.score(question.text, [candidate])[0] for candidate in question.candidates]
        np.testing.assert_allclose(pooled, alone, rtol=1e-5)  # float32 kernels differ by batch shape


def test_cnn_wo_so_explains_with_saliency_and_focus_links(trained_cnn):
    explanation = trained_cnn.explain(QUESTION, [ANSWER], 0)
    assert len(explanation.answer_weights) == len(explanation.answer_tokens) == len(parse(ANSWER).tokens)
    assert len(explanation.question_weights) == len(explanation.question_tokens)
    assert explanation.weight_kind == "saliency" and max(explanation.answer_weights) > 0
    focus = [link for link in explanation.links if link.kind == "REL-FOCUS-HUM"]
    assert focus and {link.label for link in focus} == {"PERSON"}
    assert {"hamlet", "play"} <= {link.label for link in explanation.links if link.kind == "REL"}
    assert 0.0 < explanation.score < 1.0


def test_cnn_wo_reads_no_question_analysis(demo):
    train, dev, _ = demo
    ranker = registry.create("cnn_wo", **{**FAST_CNN, "max_epochs": 1})
    ranker.fit(train[:4], dev[:2], seed=1, progress=False)
    assert ranker.analyzer is None and ranker.model().semantic is None
    assert not [link for link in ranker.explain(QUESTION, [ANSWER], 0).links if link.kind.startswith("REL-FOCUS")]


def test_mphcnn_explains_with_match_matrices_per_level(trained_mphcnn):
    explanation = trained_mphcnn.explain(QUESTION, [ANSWER], 0)
    rows, columns = len(parse(QUESTION).tokens), len(parse(ANSWER).tokens)
    names = [f"{kind} level {h}" for kind in ("words", "characters") for h in range(5)]
    assert list(explanation.matrices) == names
    for name in names:
        matrix = np.array(explanation.matrices[name])
        assert matrix.shape == (rows, columns) and matrix.min() >= 0 and matrix.max() <= 1
    words = np.array(explanation.matrices["words level 0"])
    assert np.all(words.sum(axis=1) <= 1 + 1e-6)  # one softmax row per question word
    assert len(explanation.answer_weights) == columns and len(explanation.question_weights) == rows
    assert explanation.weight_kind == "match"


def test_mphcnn_turns_the_url_perspective_on_when_candidates_have_urls():
    def question(qid: str, text: str, split: str) -> Question:
        return Question(qid, text, [
            Candidate(f"{qid}-1", "Shakespeare wrote Hamlet.", label=1, url="http://example.org/shakespeare-hamlet"),
            Candidate(f"{qid}-2", "Paris is in France.", label=0),
        ], split)  # fmt: skip

    train, dev = [question("t1", "Who wrote Hamlet?", "train")], [question("d1", "Who wrote Hamlet?", "dev")]
    ranker = registry.create("mphcnn", filters=4, max_epochs=1)
    ranker.fit(train, dev, progress=False)
    assert ranker.url_perspective is True and "ham" in ranker.trigrams
    pair = ranker.pool_pairs([("Who wrote Hamlet?", [train[0].candidates[0], "No URL here."])])
    assert ranker.encode(pair)["url_chars"].shape[0] == 2
    scores = ranker.score("Who wrote Hamlet?", train[0].candidates)
    assert scores.shape == (2,) and np.all(np.isfinite(scores))
    assert registry.create("mphcnn", filters=4, url_perspective=False).url_perspective is False
