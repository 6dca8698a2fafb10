"""Calibration of new annotators (issue 21, item 1): the rule that picks the gold pairs, the result
against hand-computed agreement and kappa, and the store's settings and judgements on SQLite and
PostgreSQL (kept with history, never labels, never in the agreement between annotators; in team
mode only an admin turns it on)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from db.base import CandidateRecord
from db.calibration import DEFAULT_CALIBRATION, CalibrationJudgement
from db.store import Store
from qa_core.access import SYSTEM, AccessDenied
from qa_core.services.labeling import report_from_labels, training_labels
from qa_core.services.labeling.calibration import (
    Calibration,
    binary_gold,
    calibration_result,
    gold_pairs,
    results_table,
    shown_order,
)
from qa_core.services.labeling.dashboard import build_dashboard, dashboard_csv
from qa_core.types import Candidate, Dataset, InputError, Question
from tests.teams import sign_in

AT = datetime(2026, 1, 1, tzinfo=UTC)


def record(n: int, gold: int | None) -> CandidateRecord:
    return CandidateRecord(n, f"q{n // 3}", f"d{n}", f"question {n // 3}", f"answer {n}", gold)


def judgement(n: int, value: int, gold: int, run: int = 5, annotator: str = "ann") -> CalibrationJudgement:
    return CalibrationJudgement(n, 1, run, n, f"q{n}", f"d{n}", annotator, value, gold, None, AT,
                                AT + timedelta(seconds=n))


# ------------------------------------------------------------------ the rule (pure)


def test_gold_pairs_alternate_relevant_and_not_in_a_stable_seeded_order() -> None:
    records = [record(n, 1 if n % 4 == 0 else 0) for n in range(40)] + [record(99, None)]
    chosen = gold_pairs(records, 6)
    assert [r.gold_label for r in chosen] == [1, 0, 1, 0, 1, 0]  # relevant first, alternating
    assert chosen == gold_pairs(list(reversed(records)), 6)  # the order of the rows does not matter
    assert gold_pairs(records, 3) == chosen[:3]  # a smaller run is the start of a larger one
    assert gold_pairs(records, 6, seed=1) != chosen  # the seed decides
    assert 99 not in {r.candidate_id for r in gold_pairs(records, 41)}  # never a pair without gold
    few = [record(0, 1), record(1, 0), record(2, 0), record(3, 0)]
    assert [r.gold_label for r in gold_pairs(few, 4)] == [1, 0, 0, 0]  # one class ran out: the other fills
    assert binary_gold(records) and not binary_gold([record(0, 3), record(1, 0)])


def test_each_annotator_has_an_own_order_that_a_fixed_pattern_of_keys_cannot_learn() -> None:
    records = [record(n, 1 if n % 4 == 0 else 0) for n in range(40)]
    chosen = gold_pairs(records, 6)
    orders = {name: shown_order(chosen, name) for name in ("ann", "bob", "cy", "dee", "eve")}
    assert all(sorted(order) == sorted(chosen) for order in orders.values())  # the same pairs
    assert orders["ann"] == shown_order(list(reversed(chosen)), "ann")  # stable: a run resumes in order
    assert len({tuple(r.candidate_id for r in order) for order in orders.values()}) > 1  # orders differ
    # "Relevant first, then alternating" (1 0 1 0 1 0 pressed blindly) is not everyone's gold.
    pattern = [1, 0, 1, 0, 1, 0]
    assert not all([r.gold_label for r in order] == pattern for order in orders.values())


def test_binary_gold_compares_relevance_with_hand_computed_agreement_and_kappa() -> None:
    grades, gold = [3, 0, 1, 0, 2], [1, 0, 0, 0, 1]
    result = calibration_result("ann", [judgement(n, g, y) for n, (g, y) in enumerate(zip(grades, gold))], binary=True)
    # As relevance: 1 0 1 0 1 against 1 0 0 0 1: four of five agree.
    assert [p.counted_as for p in result.pairs] == [1, 0, 1, 0, 1]
    assert result.exact == pytest.approx(0.8)
    # Cohen's kappa: p_o = 0.8, p_e = 0.6 * 0.4 + 0.4 * 0.6 = 0.48 -> (0.8 - 0.48) / 0.52; two
    # categories make the quadratic weights one constant, so weighted equals unweighted.
    assert result.weighted_kappa == pytest.approx(0.32 / 0.52)
    assert result.complete and result.finished_at == AT + timedelta(seconds=4)


def test_graded_gold_compares_grades_with_hand_computed_weighted_kappa() -> None:
    grades, gold = [4, 3, 2, 0], [4, 2, 2, 1]
    result = calibration_result("ann", [judgement(n, g, y, run=4) for n, (g, y) in enumerate(zip(grades, gold))],
                                binary=False)
    assert result.exact == pytest.approx(0.5)
    # Quadratic weights (i - j)^2 / 16 over grades 0..4: observed disagreement (1 + 1) / 16 / 4 = 1/32;
    # expected from the marginals 13.5 / 4 / 16 = 0.2109375; kappa = 1 - (1/32) / 0.2109375 = 23/27.
    assert result.weighted_kappa == pytest.approx(23 / 27)
    undefined = calibration_result("ann", [judgement(n, 0, 0, run=3) for n in range(3)], binary=True)
    assert undefined.exact == 1.0 and undefined.weighted_kappa is None  # no variation: kappa undefined
    partial = calibration_result("ann", [judgement(0, 1, 1, run=3)], binary=True)
    assert not partial.complete and partial.finished_at is None


def test_the_dashboard_table_has_one_row_per_annotator() -> None:
    judged = [judgement(0, 2, 1, 2, "bob"), judgement(1, 0, 0, 2, "bob"), judgement(2, 0, 1, 2, "ann")]
    table = results_table(judged, binary=True).to_dict("records")
    assert [(r["annotator"], r["pairs judged"], r["of"], r["exact agreement"]) for r in table] == [
        ("ann", 1, 2, 0.0), ("bob", 2, 2, 1.0)]
    assert table[1]["weighted κ"] == pytest.approx(1.0) and pd.isna(table[0]["finished"])  # ann has not finished
    board = build_dashboard({})  # nothing labelled: calibration is apart from the agreement between annotators
    board.calibration = results_table(judged, binary=True)
    exported = pd.read_csv(io.StringIO(dashboard_csv(board)))
    rows = exported[exported["table"] == "calibration against gold"]
    assert rows["annotator"].tolist() == ["ann", "bob"] and rows["exact agreement"].tolist() == [0.0, 1.0]


# ------------------------------------------------------------------ the store (SQLite and PostgreSQL)


def gold_dataset() -> Dataset:
    questions = [
        Question(f"q{n}", f"question {n}", [Candidate("a", f"right answer {n}", label=1),
                                            Candidate("b", f"wrong answer {n}", label=0)], split="train")
        for n in range(4)
    ]
    questions.append(Question("t0", "a test question", [Candidate("a", "test answer", label=1),
                                                         Candidate("b", "test miss", label=0)], split="test"))
    return Dataset("cal", questions)


def test_calibration_runs_stores_its_judgements_apart_from_labels_and_reports(store: Store) -> None:
    store.datasets.import_dataset(gold_dataset())
    assert store.calibration.calibration_settings("cal") == DEFAULT_CALIBRATION  # off by default
    assert Calibration.build(store, "cal", "ann").current is None
    settings = store.calibration.set_calibration("cal", True, 3, "lead")
    assert (settings.enabled, settings.pairs, settings.changed_by) == (True, 3, "lead")
    for pairs in (0, 51, True):
        with pytest.raises(InputError, match="1 to 50 gold pairs"):
            store.calibration.set_calibration("cal", True, pairs, "lead")
    store.annotation.save_guidelines("cal", "Grade 3 when it answers.", "lead")

    ann = Calibration.build(store, "cal", "ann", holder="tab1")
    bob = Calibration.build(store, "cal", "bob")
    assert sorted(ann.due) == sorted(bob.due) and ann.total == 3  # every annotator judges the same gold pairs
    assert {r.qid for r in ann.due} <= {"q0", "q1", "q2", "q3"}  # TRAIN only, never TEST
    shown = datetime.now(UTC) - timedelta(seconds=7)
    first = ann.current
    assert ann.judge(first, 3, shown) is False
    assert store.calibration.record_calibration(first.candidate_id, 0, "ann", ann.settings_id, shown) is None  # first stands
    store.calibration.set_calibration("cal", True, 5, "lead")  # a larger run for those who have not started
    ann = Calibration.build(store, "cal", "ann", holder="tab1")
    assert (ann.total, ann.position) == (3, 2)  # ann's run keeps the size it started with
    assert ann.judge(ann.current, 0, shown) is False
    assert ann.judge(ann.current, 4, shown) is True  # the last one due
    done = Calibration.build(store, "cal", "ann")
    assert done.current is None and done.result().complete and len(done.result().pairs) == 3
    assert Calibration.build(store, "cal", "bob").total == 5

    judged = store.calibration.calibration_judgements("cal")
    assert [(j.annotator, j.run_pairs, j.guideline_version) for j in judged] == [("ann", 3, 1)] * 3
    assert judged[0].value == 3 and judged[0].gold == first.gold_label
    assert abs((judged[0].judged_at - judged[0].shown_at).total_seconds() - 7) < 5
    grades = [j.value for j in judged]
    relevant = [int(g > 0) for g in grades]
    assert done.result().exact == pytest.approx(sum(r == j.gold for r, j in zip(relevant, judged)) / 3)
    # Not labels: no training label, no agreement, no progress in the queue.
    assert store.labels.current_labels("cal") == {}
    assert training_labels(store, "cal").counts()["labels"] == 0
    assert report_from_labels(store.labels.current_labels("cal")).annotators == []

    for candidate in store.datasets.candidate_rows("cal")[:5]:  # cy labelled 5 pairs before calibration was on
        store.labels.add_label(candidate.candidate_id, "cy", 1)
    assert Calibration.build(store, "cal", "cy").current is None  # not new: straight to work
    assert Calibration.build(store, "cal", "dee").total == 5  # new: calibrates

    store.calibration.set_calibration("cal", False, 5, "lead")  # off: bob, who never started, goes straight to work
    assert Calibration.build(store, "cal", "bob").current is None
    store.datasets.import_dataset(Dataset("nogold", [Question("q", "q?", [Candidate("a", "x"), Candidate("b", "y")])]))
    with pytest.raises(InputError, match="needs a gold label"):
        store.calibration.record_calibration(store.datasets.candidate_rows("nogold")[0].candidate_id, 1, "ann", settings.settings_id, shown)


def test_in_team_mode_only_an_admin_turns_calibration_on_and_judgements_are_ones_own(database_url: str) -> None:
    team = Store(database_url, team=True)
    try:
        team.datasets.import_dataset(gold_dataset(), actor=SYSTEM)
        ada, anna = sign_in(team, "ada"), sign_in(team, "anna")  # the first user is the admin
        with pytest.raises(AccessDenied, match="may not edit a dataset's guidelines or labelling settings"):
            team.calibration.set_calibration("cal", True, 2, actor=anna)
        assert team.calibration.calibration_settings("cal") == DEFAULT_CALIBRATION
        settings = team.calibration.set_calibration("cal", True, 2, actor=ada)
        assert settings.changed_by == "ada@example.org"
        assert [e["action"] for e in team.users.audit_events(["calibration_settings"])] == ["calibration_settings"]
        run = Calibration.build(team, "cal", anna.name, actor=anna)
        with pytest.raises(AccessDenied, match="cannot record a judgement as annotator 'bob'"):
            team.calibration.record_calibration(run.current.candidate_id, 2, "bob", run.settings_id, datetime.now(UTC), actor=anna)
        run.judge(run.current, 2, datetime.now(UTC))
        assert [j.annotator for j in team.calibration.calibration_judgements("cal")] == ["anna@example.org"]
    finally:
        team.close()
