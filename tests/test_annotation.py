"""Issue 21 on the store and the labelling services, on SQLite and PostgreSQL: names that draw
nothing, reviewers who are a party, undo per session, judgement times, the overlap setting,
agreement intervals and thresholds, scoring in the background."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from db.store import Store
from qa_core.rankers import registry
from qa_core.services.labeling import (
    MIN_SHARED_PAIRS,
    BackgroundScores,
    LabelingSession,
    annotator_name,
    model_scores,
    queue_policy,
    report_from_labels,
)
from qa_core.types import Candidate, Dataset, InputError, Question
from tests import ROOT


def small_dataset() -> Dataset:
    return Dataset(
        "ann",
        [
            Question("q1", "who wrote hamlet?", [Candidate(f"d{i}", f"shakespeare wrote {i}") for i in range(3)]),
            Question("q2", "where is paris?", [Candidate(f"d{i}", f"paris is in {i}") for i in range(3)], "dev"),
        ],
    )


@pytest.fixture
def ann_store(store: Store) -> Store:
    store.datasets.import_dataset(small_dataset())
    return store


# ------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    "name, message",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("\u200b", "blank"),  # zero-width space
        ("\u200b\u200c\u200d\ufeff", "blank"),  # zero-width space, (non-)joiner, BOM
        ("\u3164", "blank"),  # Hangul filler: a "letter" that draws nothing
        ("\u0301\u0301", "blank"),  # combining marks alone
        ("ali\u200bce", "invisible character"),  # looks like "alice"
        ("\u202eecila", "invisible character"),  # right-to-left override
    ],
)
def test_names_that_draw_nothing_are_refused_everywhere(ann_store: Store, name: str, message: str) -> None:
    candidate = ann_store.datasets.candidate_rows("ann")[0].candidate_id
    with pytest.raises(InputError, match=message):
        annotator_name(name)
    with pytest.raises(InputError, match=message):
        ann_store.labels.add_label(candidate, name, 1)
    with pytest.raises(InputError, match=message):
        ann_store.labels.adjudicate(candidate, 1, name)
    assert ann_store.labels.current_labels("ann") == {}


def test_real_names_pass_normalised(ann_store: Store) -> None:
    assert annotator_name("  Zoë ") == "Zoë"
    assert annotator_name("Zoe\u0308") == "Zoë"  # NFC: one annotator however it was typed
    assert annotator_name("मनीषा") == "मनीषा"  # combining vowel signs inside a name are fine
    assert annotator_name("👩\u200d🔬") == "👩\u200d🔬"  # a ZWJ inside an emoji sequence stays


# ------------------------------------------------------------------------------ review


def test_a_reviewer_cannot_settle_a_conflict_they_are_part_of(ann_store: Store) -> None:
    candidate = ann_store.datasets.candidate_rows("ann")[0].candidate_id
    ann_store.labels.add_label(candidate, "alice", 0)
    ann_store.labels.add_label(candidate, "bob", 3)
    with pytest.raises(InputError, match="alice labelled this pair"):
        ann_store.labels.adjudicate(candidate, 3, "alice")
    assert ann_store.labels.adjudications("ann") == {}
    ann_store.labels.adjudicate(candidate, 2, "carol")
    assert ann_store.labels.adjudications("ann")[candidate]["adjudicator"] == "carol"
    ann_store.labels.undo_last("bob")  # bob took his label back: no longer a party
    ann_store.labels.adjudicate(candidate, 1, "bob")
    assert ann_store.labels.adjudications("ann")[candidate]["value"] == 1


# ------------------------------------------------------------------------------ undo per session


def session(store: Store, annotator: str, holder: str) -> LabelingSession:
    return LabelingSession.build(store, "ann", annotator, "random", holder=holder, policy=queue_policy(store, "ann"))


def test_undo_is_per_session_not_across_tabs(ann_store: Store) -> None:
    tab_a, tab_b = session(ann_store, "alice", "tab-a"), session(ann_store, "alice", "tab-b")
    a_item = tab_a.current()
    tab_a.label(a_item, 3)
    b_item = tab_b.current()
    tab_b.label(b_item, 1)  # the newest label of alice: tab b's
    undone = tab_a.undo()
    assert undone is not None and undone.candidate_id == a_item.candidate_id  # tab a's own, not b's newer one
    assert ann_store.labels.current_labels("ann") == {b_item.candidate_id: {"alice": 1}}
    assert tab_a.undo() is None  # nothing of tab a's left
    assert ann_store.labels.current_labels("ann") == {b_item.candidate_id: {"alice": 1}}
    assert tab_b.undo().candidate_id == b_item.candidate_id


# ------------------------------------------------------------------------------ times, settings


def test_judgement_times_run_from_shown_to_judged(ann_store: Store) -> None:
    alice = session(ann_store, "alice", "tab")
    item = alice.current()
    time.sleep(0.3)
    label_id = alice.label(item, 2)
    ann_store.labels.add_label(ann_store.datasets.candidate_rows("ann")[-1].candidate_id, "bob", 1)  # outside the queue: no time
    (timing,) = ann_store.annotation.judgement_times("ann")
    assert (timing.label_id, timing.candidate_id, timing.annotator) == (label_id, item.candidate_id, "alice")
    assert timing.shown_at == item.claim.claimed_at
    assert 0.3 <= timing.seconds < 30
    alice.undo()
    assert ann_store.annotation.judgement_times("ann") == []  # a retracted judgement is no longer timed


def test_overlap_setting_is_the_stores_with_history(ann_store: Store) -> None:
    assert queue_policy(ann_store, "ann").overlap_share == 0.2  # the default
    ann_store.annotation.set_annotation_settings("ann", 0.5, 2, "lead")
    ann_store.annotation.set_annotation_settings("ann", 1.0, 3, "lead")
    settings = ann_store.annotation.annotation_settings("ann")
    assert (settings.overlap_share, settings.overlap, settings.changed_by) == (1.0, 3, "lead")
    policy = queue_policy(ann_store, "ann")
    assert set(policy.targets([r.candidate_id for r in ann_store.datasets.candidate_rows("ann")]).values()) == {3}
    for share, overlap in [(1.5, 2), (-0.1, 2), (0.5, 1), (0.5, True)]:
        with pytest.raises(InputError):
            ann_store.annotation.set_annotation_settings("ann", share, overlap, "lead")
    with pytest.raises(InputError, match="unknown dataset"):
        ann_store.annotation.set_annotation_settings("nope", 0.5, 2, "lead")


# ------------------------------------------------------------------------------ agreement (pure)


def test_agreement_reports_shared_pairs_and_refuses_to_mean_something_over_few() -> None:
    one = report_from_labels({1: {"a": 1, "b": 2}})
    (pair,) = one.pairs
    assert pair.items == 1 and not pair.enough and not one.enough
    assert pair.weighted_kappa_ci.low is None and one.alpha_ci.low is None  # no interval from one pair
    assert one.overlap_share == 1.0 and one.judged == 1

    # Ten shared pairs, two disagreements by one grade: enough, with an interval around the value.
    grades = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (0, 1), (1, 1), (2, 2), (3, 4), (4, 4)]
    labels = {i: {"a": a, "b": b} for i, (a, b) in enumerate(grades)} | {99: {"a": 2}}
    report = report_from_labels(labels)
    (pair,) = report.pairs
    assert pair.items == MIN_SHARED_PAIRS == 10 and pair.enough and report.enough
    assert report.overlap_share == pytest.approx(10 / 11)
    assert pair.weighted_kappa_ci.low <= pair.weighted_kappa <= pair.weighted_kappa_ci.high <= 1.0
    assert report.alpha_ci.low <= report.alpha <= report.alpha_ci.high <= 1.0
    assert report_from_labels(labels).pairs == report.pairs  # seeded: the same interval every time


# ------------------------------------------------------------------------------ scoring in the background


def test_background_scores_fill_in_and_match_scoring_at_once(ann_store: Store) -> None:
    records = ann_store.datasets.candidate_rows("ann")
    ranker = registry.create("overlap")
    job = BackgroundScores(ranker, records, questions_per_step=1)
    final = job.wait(timeout=60)
    assert final.done and final.error is None and (final.scored, final.total) == (6, 6)
    assert job.snapshot() == pytest.approx(model_scores(ranker, records))


def test_background_scoring_reports_a_failure_and_keeps_what_it_scored(ann_store: Store) -> None:
    class Refuses:
        """A ranker whose second step fails (as a model refusing a text would)."""

        calls = 0

        def score_pools(self, pools):
            Refuses.calls += 1
            if Refuses.calls > 1:
                raise InputError("the model refuses this text")
            return [[0.5] * len(candidates) for _, candidates in pools]

        def covered(self, pools):  # the ranker contract: it ranks every pair
            return [[True] * len(candidates) for _, candidates in pools]

    job = BackgroundScores(Refuses(), ann_store.datasets.candidate_rows("ann"), questions_per_step=1)
    final = job.wait(timeout=60)
    assert final.done and final.error == "the model refuses this text" and final.scored == 3


EXIT_WHILE_SCORING = """
import sys, time
from types import SimpleNamespace
from qa_core.services.labeling import BackgroundScores

class Slow:
    \"\"\"Each step is logged when it starts and when it ends, and takes 0.2 s.\"\"\"
    def score_pools(self, pools):
        with open(sys.argv[1], "a") as log:
            log.write("start\\n")
        time.sleep(0.2)
        with open(sys.argv[1], "a") as log:
            log.write("end\\n")
        return [[0.5] * len(candidates) for _, candidates in pools]
    def covered(self, pools):
        return [[True] * len(candidates) for _, candidates in pools]

records = [SimpleNamespace(candidate_id=i, qid=f"q{i}", doc_id="d", question="q?", candidate="a") for i in range(50)]
BackgroundScores(Slow(), records, questions_per_step=1)
time.sleep(0.5)  # then exit, two or three steps in
"""


def test_exit_stops_background_scoring_after_its_current_step(tmp_path: Path) -> None:
    """A scoring thread is not cut off mid-step when the process exits (one that was, inside spaCy's
    native code, aborted the process: "libblis: Aborting"); nor does exit wait for the whole dataset."""
    log = tmp_path / "steps.log"
    done = subprocess.run([sys.executable, "-c", EXIT_WHILE_SCORING, str(log)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    steps = log.read_text().split()
    assert 1 <= steps.count("start") < 50
    assert steps == ["start", "end"] * steps.count("start")  # every step that started, ended


# ------------------------------------------------------------------------------ guidelines


def test_guidelines_are_versioned_and_every_queue_label_records_its_version(ann_store: Store) -> None:
    assert ann_store.annotation.guidelines("ann") is None
    alice = session(ann_store, "alice", "tab")
    before = alice.label(alice.current(), 1)  # made under no guidelines
    first = ann_store.annotation.save_guidelines("ann", "# Grades\n\nA date answers *when*.", "lead")
    assert (first.version, first.author) == (1, "lead")
    assert ann_store.annotation.save_guidelines("ann", "# Grades\n\nA date answers *when*.", "bob") == first  # unchanged: no new version
    under_first = alice.label(alice.current(), 2)
    second = ann_store.annotation.save_guidelines("ann", "# Grades\n\nA year alone is partly answering.", "lead")
    under_second = alice.label(alice.current(), 3)
    assert second.version == 2 and ann_store.annotation.guidelines("ann") == second
    assert [g.version for g in ann_store.annotation.guideline_history("ann")] == [1, 2]
    versions = ann_store.annotation.label_guideline_versions("ann")
    assert (versions[before], versions[under_first], versions[under_second]) == (None, 1, 2)
    for text, message in [("   ", "empty"), ("x\x00", "NUL"), ("x" * 100_001, "too long")]:
        with pytest.raises(InputError, match=message):
            ann_store.annotation.save_guidelines("ann", text, "lead")
    with pytest.raises(InputError, match="blank"):
        ann_store.annotation.save_guidelines("ann", "fine", "\u200b")
    assert len(ann_store.annotation.guideline_history("ann")) == 2
