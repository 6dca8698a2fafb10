"""Contrastive explanations and words across a slice (qa_core.services.contrastive, slice_words) on a
hand-made pool where word overlap ranks a wrong answer above the right one (real spaCy)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from qa_core.rankers import registry
from qa_core.services import contrastive, ranking, slice_words
from qa_core.services.ranking import rank_pool
from qa_core.types import Candidate, Question

QUESTION = Question("q1", "Who wrote the play Hamlet?", [
    Candidate("right", "Shakespeare was its author.", label=1),
    Candidate("wrong", "Hamlet is a famous play about a Danish prince.", label=0),
    Candidate("other", "The weather is cold.", label=0),
], "test")


@pytest.fixture(scope="module")
def result():
    return rank_pool(registry.create("overlap"), QUESTION.text, QUESTION.candidates, qid=QUESTION.qid)


def test_default_pair_is_the_top_wrong_answer_against_the_best_right_one(result):
    assert [s.candidate.doc_id for s in result.scored][:1] == ["wrong"]
    above, below = contrastive.default_pair(result)
    assert result.at(above).candidate.doc_id == "wrong" and result.at(below).candidate.doc_id == "right"


def test_default_pair_is_found_below_a_right_first_answer():
    """#1 right, #2 wrong above #3 and #4 right (TrecQA 34.4 with smcnn, issue 45): the pair is #2
    against #3, one of the pairs Ask's toggle counts, never "no wrong answer above a right one" nor
    right #1 against wrong #2."""
    question = Question("q2", "Who wrote the play Hamlet?", [
        Candidate("first", "Shakespeare wrote the play Hamlet.", label=1),
        Candidate("wrong", "Hamlet is a famous play.", label=0),
        Candidate("third", "Shakespeare wrote it.", label=1),
        Candidate("fourth", "Shakespeare was its author.", label=1),
    ], "test")
    ranked = rank_pool(registry.create("overlap"), question.text, question.candidates, qid=question.qid)
    assert [s.candidate.doc_id for s in ranked.scored] == ["first", "wrong", "third", "fourth"]
    assert contrastive.default_pair(ranked) == (2, 3)
    assert ranking.missed_answers(ranked) == [3, 4]  # the toggle's count: right answers below a wrong one
    # By the stored labels where gold is missing; a pool whose wrong answers are all below the right ones has none.
    unlabelled = [replace(c, label=None) for c in question.candidates]
    ranked = rank_pool(registry.create("overlap"), question.text, unlabelled, qid=question.qid)
    assert contrastive.default_pair(ranked, {"first": 1, "wrong": 0, "fourth": 1}) == (2, 4)
    assert contrastive.default_pair(ranked, {"first": 1, "wrong": 1, "third": 0, "fourth": 0}) is None


def test_contrast_attributes_the_gap_and_measures_it(result):
    above, below = contrastive.default_pair(result)
    shown = contrastive.contrast(result, below, above, "occlusion")  # order does not matter
    assert shown.above.rank == above and shown.gap == pytest.approx(result.at(above).score - result.at(below).score)
    by_word = dict(zip(shown.above_explanation.answer_tokens, shown.above_explanation.answer_weights))
    assert by_word["Hamlet"] > 0 and by_word["play"] > 0 and by_word["Danish"] == 0
    narrowed, random_narrowed = shown.narrowed()
    assert narrowed == pytest.approx(shown.above_test.comprehensiveness[0.2]) and narrowed > random_narrowed
    # B's weights are minus its attributions to its own score: nothing of B's shares the question.
    assert all(w <= 0 for w in shown.below_explanation.answer_weights)


def test_slice_words_counts_the_top_words_of_wrong_answers_above_right_ones():
    found = slice_words.examples(registry.create("overlap"), [QUESTION], "hand", "overlap", explainer="model")
    assert sorted(found["lemma"]) == ["hamlet", "play"]  # the two shared content words, top of the wrong answer
    assert set(found["in_question"]) == {"yes"} and set(found["doc_id"]) == {"wrong"}
    assert found["ask"].iloc[0] == "/Ask?dataset=hand&qid=q1&model=overlap&view=contrast"
    pos = slice_words.counts(found, "pos")
    assert dict(zip(pos["pos"], pos["words"])) == {"PROPN": 1, "NOUN": 1}
    assert slice_words.counts(found, "in_question").to_dict("records") == [
        {"in_question": "yes", "words": 2, "answers": 1, "questions": 1}
    ]
    table = pd.DataFrame({"qid": ["q1", "q2"], "class": ["HUM", "LOC"]})
    assert slice_words.slice_questions([QUESTION], table, "class", "HUM") == [QUESTION]
    assert slice_words.slice_questions([QUESTION], table, "class", "LOC") == []
