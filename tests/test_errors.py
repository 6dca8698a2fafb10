"""qa_core.services.errors on hand-written pools: per-question metrics worst first, slices, label sources."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from qa_core.evaluation import qrels_from_questions
from qa_core.rankers import registry
from qa_core.services import errors, experiments
from qa_core.services.evaluation_labels import LabelRule, describe, evaluation_labels, parse_rule
from qa_core.types import Candidate, Dataset, InputError, Question

QUESTIONS = [
    Question(
        "q-who",
        "Who discovered penicillin?",
        [
            Candidate("a", "Penicillin was discovered by Alexander Fleming in 1928.", label=1),
            Candidate("b", "Penicillin is an antibiotic used against infections.", label=0),
            Candidate("c", "Fleming worked in London.", label=0),
        ],
        split="test",
    ),
    Question(
        "q-where",
        "Where is the Eiffel Tower located in the city of Paris today?",
        [
            Candidate("a", "Visitors queue for hours.", label=0),
            Candidate("b", "It stands on the Champ de Mars.", label=1),
        ],
        split="test",
    ),
    Question(
        "q-none",
        "When did the war end?",
        [Candidate("a", "The war was long.", label=0), Candidate("b", "Many died.", label=0)],
        split="test",
    ),
]
# Scores that put q-who's answer first and q-where's answer second; q-none has no correct answer.
RUN = {
    "q-who": {"a": 0.9, "b": 0.5, "c": 0.1},
    "q-where": {"a": 0.8, "b": 0.3},
    "q-none": {"a": 0.6, "b": 0.2},
}


@pytest.fixture(scope="module")
def profiles() -> pd.DataFrame:
    return errors.question_profiles(QUESTIONS)


@pytest.fixture(scope="module")
def overlaps() -> dict[str, dict[str, float]]:
    return errors.candidate_overlaps(QUESTIONS)


def test_profiles_give_class_and_length(profiles):
    assert list(profiles.index) == ["q-who", "q-where", "q-none"]
    assert list(profiles["class"]) == ["HUM", "LOC", "NUM"]  # the wh-word rules without trained classifiers
    assert list(profiles["words"]) == [3, 12, 5]  # punctuation is not a word
    assert list(profiles["length"]) == ["1-5 words", "9-12 words", "1-5 words"]


def test_overlap_is_the_overlap_baselines_idf_share(overlaps):
    who = overlaps["q-who"]
    assert who["a"] > who["b"] > 0 and who["c"] == 0.0  # "discovered" is in a only; "Fleming" is no question word
    assert overlaps["q-where"]["b"] == 0.0  # the correct answer shares no word: a lexical gap


def test_error_table_is_worst_first_with_ir_measures_values(profiles, overlaps):
    qrels, sources = qrels_from_questions(QUESTIONS), {}
    table = errors.error_table(RUN, qrels, profiles, overlaps, sources, clean=True)
    assert list(table["qid"]) == ["q-where", "q-who"]  # q-none has no correct answer: not clean
    where, who = table.iloc[0], table.iloc[1]
    assert (where["AP"], where["RR"], where["P@1"]) == (0.5, 0.5, 0.0)
    assert where["nDCG@10"] == pytest.approx(1 / math.log2(3))
    assert (who["AP"], who["RR"], who["P@1"], who["nDCG@10"]) == (1.0, 1.0, 1.0, 1.0)
    assert where["overlap"] == 0.0 and where["overlap_bucket"] == "overlap < 0.25"
    assert who["overlap"] == overlaps["q-who"]["a"] and who["correct"] == 1 and who["candidates"] == 3

    raw = errors.error_table(RUN, qrels, profiles, overlaps, sources, clean=False)
    # q-none scores 0 under every model (no correct candidate): after the questions a model could get right
    assert list(raw["qid"]) == ["q-where", "q-who", "q-none"]
    assert list(errors.unanswerable(raw)) == [False, False, True]
    none = raw.iloc[-1]
    assert none["AP"] == 0.0 and math.isnan(none["overlap"]) and none["overlap_bucket"] == errors.NO_CORRECT_ANSWER


def test_a_question_missing_from_the_run_scores_zero(profiles, overlaps):
    qrels, sources = qrels_from_questions(QUESTIONS), {}
    table = errors.error_table({"q-who": RUN["q-who"]}, qrels, profiles, overlaps, sources).set_index("qid")
    assert table.loc["q-where", "AP"] == 0.0
    assert table.loc["q-none", "AP"] == 0.0  # clean off by default, as evaluate and every page


def test_slices_average_per_group_in_bucket_order(profiles, overlaps):
    qrels, sources = qrels_from_questions(QUESTIONS), {}
    table = errors.error_table(RUN, qrels, profiles, overlaps, {**sources, "q-who": "labels"}, clean=False)
    by_class = errors.slice_table(table, "question class").set_index("question class")
    assert by_class.loc["HUM", "AP"] == 1.0 and by_class.loc["LOC", "AP"] == 0.5 and by_class["questions"].sum() == 3
    by_length = errors.slice_table(table, "question length")
    assert list(by_length["question length"]) == ["1-5 words", "9-12 words"]
    assert list(by_length["questions"]) == [2, 1] and by_length["AP"].iloc[0] == 0.5  # mean of 1.0 and 0.0
    by_source = errors.slice_table(table, "label source")
    assert list(by_source["label source"]) == ["gold", "labels"]
    assert list(errors.slice_table(table, "lexical overlap")["lexical overlap"])[-1] == errors.NO_CORRECT_ANSWER
    with pytest.raises(KeyError, match="no slice"):
        errors.slice_table(table, "colour")


def test_score_questions_scores_every_pool():
    run = experiments.score_questions(registry.create("bm25"), QUESTIONS)
    assert set(run) == {"q-who", "q-where", "q-none"} and set(run["q-who"]) == {"a", "b", "c"}
    assert run["q-who"]["a"] > run["q-who"]["c"]


def test_scoring_with_progress_reports_blocks_and_gives_the_same_run(monkeypatch):
    monkeypatch.setattr(experiments, "SCORING_BLOCK", 2)
    seen = []
    ranker = registry.create("bm25")
    run = experiments.score_questions(ranker, QUESTIONS, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 3), (2, 3), (3, 3)]
    assert run == experiments.score_questions(ranker, QUESTIONS)


def test_label_rules_gold_by_default_training_rule_on_request(store):
    store.datasets.import_dataset(Dataset("toy", QUESTIONS))
    store.labels.add_label(store.datasets.find_candidate_id("toy", "q-none", "b"), "ann", 2)  # now has a correct answer
    store.labels.add_label(store.datasets.find_candidate_id("toy", "q-where", "a"), "ann", 1)
    store.labels.adjudicate(store.datasets.find_candidate_id("toy", "q-where", "a"), 0, "lead")  # overrules ann
    gold = evaluation_labels(store, "toy")
    assert gold.rule is LabelRule.GOLD and set(gold.sources.values()) == {"gold"}
    assert qrels_from_questions(gold.questions) == qrels_from_questions(QUESTIONS)  # app labels change nothing
    training = evaluation_labels(store, "toy", LabelRule.TRAINING)
    assert training.sources == {"q-who": "gold", "q-where": "adjudicated", "q-none": "labels"}
    qrels = qrels_from_questions(training.questions)
    assert qrels["q-none"] == {"a": 0, "b": 2} and qrels["q-where"] == {"a": 0, "b": 1}
    assert "adjudication" in describe(LabelRule.TRAINING) and describe(LabelRule.GOLD).startswith("Labels: gold")
    with pytest.raises(InputError, match="unknown label rule 'majority'"):
        parse_rule("majority")


def test_tied_candidates_are_counted_and_their_range_given(profiles, overlaps):
    qrels, sources = qrels_from_questions(QUESTIONS), {}
    tied = {**RUN, "q-who": {"a": 0.5, "b": 0.5, "c": 0.5}}  # the correct a is last by the rule (doc id descending)
    table = errors.error_table(tied, qrels, profiles, overlaps, sources, clean=True).set_index("qid")
    assert table.loc["q-who", "tied"] == 3 and table.loc["q-where", "tied"] == 0
    assert table.loc["q-who", "AP"] == pytest.approx(1 / 3)
    assert errors.ties(tied, qrels, profiles).questions == 3  # clean off by default, as tie_aware
    report = errors.ties(tied, qrels, profiles, clean=True)
    assert (report.tied_candidates, report.questions_with_ties, report.questions) == (3, 1, 2)
    assert report.expected["map"] == pytest.approx((0.5 + (1 + 1 / 2 + 1 / 3) / 3) / 2)
    assert (report.worst["map"], report.best["map"]) == (pytest.approx((0.5 + 1 / 3) / 2), 0.75)
    assert "3 of 5 candidates (in 1 of 2 questions)" in report.describe()
