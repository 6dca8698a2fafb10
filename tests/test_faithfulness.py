"""Faithfulness of explanations (qa_core.faithfulness) on rankers whose true token importance is
known, and the deletion path against the app's counterfactual edit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from qa_core.faithfulness import (
    FRACTIONS,
    deletion_edits,
    gap_deletions,
    only,
    pair_deletions,
    summarise,
    summarise_gaps,
    top_words,
    without,
    words,
)
from qa_core.rankers import registry
from qa_core.rankers.base import Explanation, Ranker, as_candidates
from qa_core.services.ranking import rank_pool
from qa_core.text.nlp import parse
from qa_core.types import Candidate

QUESTION = "who discovered penicillin"
ANSWER = "Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London ."


class OneWord(Ranker):
    """Scores 1 when the answer holds ``word``, else 0: only that word matters. Its explanation puts
    all weight on ``explained`` (the true word, or another one for a wrong heatmap). Not in
    qa_core/rankers, so the registry never sees it."""

    name = "one_word_stub"

    def __init__(self, word: str = "penicillin", explained: str | None = None):
        super().__init__()
        self.word, self.explained = word, explained or word

    def score_pools(self, pools):
        return [
            np.array([float(self.word in parse(c.text).tokens) for c in as_candidates(cands)]) for _, cands in pools
        ]

    def explain(self, question: str, candidates: Sequence, index: int) -> Explanation:
        tokens = list(parse(as_candidates(candidates)[index].text).tokens)
        weights = [1.0 if token == self.explained else 0.0 for token in tokens]
        return Explanation(float(self.score(question, candidates)[index]), [], tokens, weights)


def test_a_one_word_ranker_gets_comprehensiveness_1_for_its_word_and_0_for_others() -> None:
    right = pair_deletions(OneWord(), QUESTION, [ANSWER], 0)
    assert right.score == 1.0
    assert all(right.comprehensiveness[k] == 1.0 for k in FRACTIONS)  # its word is always in the top k
    assert all(right.sufficiency[k] == 0.0 for k in FRACTIONS)  # the word alone keeps the score
    wrong = pair_deletions(OneWord(explained="London"), QUESTION, [ANSWER], 0)
    assert wrong.comprehensiveness[0.1] == 0.0  # deleting "London" and another word changes nothing
    assert wrong.sufficiency[0.1] == 1.0  # "London" alone scores 0
    # Random words: 10% of 14 words is 2 of them, which miss "penicillin" 13/14 * 12/13 of the time.
    assert 0.0 <= right.random_comprehensiveness[0.1] < 1.0 and right.random_sufficiency[0.5] > 0.0


def test_deleting_words_builds_the_edits_it_says() -> None:
    tokens = list(parse(ANSWER).tokens)
    positions = words(tokens)
    assert len(positions) == len(tokens) == 14
    rng = np.random.default_rng(0)
    weights = [0.0] * 14
    weights[3], weights[5] = 2.0, 1.0  # penicillin, 1928
    assert top_words(weights, positions, 0.1, rng) == [3, 5]  # ceil(1.4) = 2 words
    assert top_words(weights, positions, 0.01, rng) == [3]  # at least one word
    assert without(tokens, [3, 5]) == "Alexander Fleming discovered in at St Mary 's Hospital in London ."
    assert only(tokens, [5, 3]) == "penicillin 1928"


@pytest.mark.parametrize("model", ["bm25", "overlap"])
def test_a_deletion_scores_what_the_apps_counterfactual_edit_scores(model: str) -> None:
    pool = [Candidate(f"d{i}", text) for i, text in enumerate(
        [ANSWER, "Penicillin is an antibiotic discovered by accident .", "Marie Curie discovered radium ."]
    )]
    ranker = registry.create(model)  # pool-dependent: the edit is scored inside its pool
    result = rank_pool(ranker, QUESTION, pool)
    rank = next(s.rank for s in result.scored if s.index == 0)
    explanation = result.explain(rank)
    deletions = pair_deletions(ranker, QUESTION, pool, 0, explanation, fractions=(0.2,), draws=1)
    top = top_words(explanation.answer_weights, words(explanation.answer_tokens), 0.2, np.random.default_rng(1))
    edited = result.counterfactual(rank, without(explanation.answer_tokens, top))
    assert deletions.score == result.at(rank).score
    assert deletions.score - deletions.comprehensiveness[0.2] == pytest.approx(edited.score, abs=1e-12)


def test_overlap_scores_a_deletion_tests_edits_in_one_spacy_batch(monkeypatch) -> None:
    """Each edit is its own pool (overlap's IDF may be the pool's): its texts still go through spaCy
    in one batch, and each edit scores what its pool scores alone."""
    from qa_core.text import nlp

    ranker = registry.create("overlap")
    pool = [ANSWER, "Penicillin is an antibiotic discovered by accident .", "Marie Curie discovered radium ."]
    ranker.score(QUESTION, pool)  # the pool's own texts parsed
    kept = ["discovered penicillin", "penicillin", "discovered", "Fleming"]  # parsed nowhere else: the years
    edits = [f"{kept[year % 4]} in {year} ." for year in range(1871, 1883)]
    spacy, batches = nlp.get_nlp(), []

    class Counted:
        def pipe(self, texts, **settings):
            texts = list(texts)
            batches.append(len(texts))
            return spacy.pipe(texts, **settings)

    monkeypatch.setattr(nlp, "get_nlp", Counted)
    scores = ranker.score_edits(QUESTION, pool, 0, edits)
    assert batches == [len(edits)]
    alone = [ranker.score(QUESTION, [edit, *pool[1:]])[0] for edit in edits]
    assert scores.tolist() == alone and len(set(alone)) > 1


def test_the_contrastive_test_narrows_the_gap_by_the_explanations_words() -> None:
    pool = [ANSWER, "Marie Curie discovered radium ."]  # A holds the one word that scores, B does not
    right = gap_deletions(OneWord(), QUESTION, pool, 0, 1, OneWord().explain(QUESTION, pool, 0))
    assert right.gap == 1.0 and all(right.narrowing[k] == 1.0 for k in FRACTIONS)  # the gap closes
    assert right.random_narrowing[0.1] < 1.0  # two random words of 14 mostly miss "penicillin"
    wrong = gap_deletions(OneWord(), QUESTION, pool, 0, 1, OneWord(explained="London").explain(QUESTION, pool, 0))
    assert wrong.narrowing[0.1] == 0.0 and wrong.random_narrowing == right.random_narrowing  # same draws
    summaries = summarise_gaps([right] * 9 + [wrong])
    assert summaries[0].narrowing == pytest.approx(0.9) and summaries[0].pairs == 10
    assert summaries[0].beats_random and not summarise_gaps([right] * 3)[0].beats_random  # 3 pairs: p >= 0.25


def test_a_pool_dependent_gap_is_scored_in_the_whole_edited_pool() -> None:
    pool = [ANSWER, "Penicillin is an antibiotic discovered by accident .", "Marie Curie discovered radium ."]
    bm25 = registry.create("bm25")  # BM25's IDF is the pool's: deleting A's words moves B's score too
    explanation = bm25.explain(QUESTION, pool, 1)
    tested = gap_deletions(bm25, QUESTION, pool, 1, 0, explanation, fractions=(0.5,), draws=1)
    edit = deletion_edits(explanation.answer_tokens, explanation.answer_weights, (0.5,), 1, 1)[0.5][0].without
    before, after = bm25.score(QUESTION, pool), bm25.score(QUESTION, [pool[0], edit, pool[2]])
    assert tested.gap == pytest.approx(before[1] - before[0])
    assert tested.narrowing[0.5] == pytest.approx(tested.gap - (after[1] - after[0])) and after[0] != before[0]


def test_summary_tests_the_explanation_against_random_words() -> None:
    rng = np.random.default_rng(3)
    pairs = 60
    table = pd.DataFrame({"score": rng.uniform(0, 1, pairs)})
    for k in FRACTIONS:
        table[f"comp@{k:g}"] = rng.normal(0.4, 0.1, pairs)  # the heatmap's words matter ...
        table[f"random_comp@{k:g}"] = rng.normal(0.1, 0.1, pairs)  # ... random ones much less
        table[f"suff@{k:g}"] = rng.normal(0.1, 0.1, pairs)
        table[f"random_suff@{k:g}"] = table[f"suff@{k:g}"] + rng.normal(0.0, 0.01, pairs)  # no better
    summaries = summarise(table)
    assert [s.fraction for s in summaries] == list(FRACTIONS)
    first = summaries[0]
    assert first.comprehensiveness_p < 0.001 and first.sufficiency_p > 0.01
    assert not first.beats_random  # comprehensive, but not more sufficient than random words
    assert first.share(first.comprehensiveness) == pytest.approx(first.comprehensiveness / first.score_range)
