"""The labelling front doors the Label and Ask pages write through (issue 35): each refuses, with the
reason and before any write, what its rule forbids, and records what the page asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.store import Store
from qa_core.access import LOCAL, SYSTEM, AccessDenied
from qa_core.services.labeling import agreement, management, review, workplace
from qa_core.types import Candidate, Dataset, InputError, Question
from tests.teams import sign_in, small


@pytest.fixture
def team_store(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path / 'team.sqlite'}", team=True)
    store.datasets.import_dataset(small(), actor=SYSTEM)
    yield store
    store.close()


@pytest.fixture
def local_store(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path / 'local.sqlite'}")
    store.datasets.import_dataset(small())
    yield store
    store.close()


def test_annotation_settings_refuse_before_writing(team_store: Store) -> None:
    ada, anna = sign_in(team_store, "ada"), sign_in(team_store, "anna")
    with pytest.raises(AccessDenied, match=r"anna@example.org \(annotator\) may not change the guidelines"):
        management.save_guidelines(team_store, "d", "Grade the answer.", anna.name, anna)
    with pytest.raises(InputError, match="choose or type your name"):
        management.set_calibration(team_store, "d", True, 2, None, ada)
    with pytest.raises(InputError, match="1 to 50 gold pairs, got 0"):
        management.set_calibration(team_store, "d", True, 0, ada.name, ada)
    with pytest.raises(InputError, match="percentage from 0 to 100, got 150"):
        management.set_overlap_percent(team_store, "d", 150, ada.name, ada)
    assert team_store.annotation.guideline_history("d") == []
    assert not team_store.calibration.calibration_settings("d").enabled

    assert management.save_guidelines(team_store, "d", "Grade the answer.", ada.name, ada).version == 1
    team_store.annotation.set_annotation_settings("d", 0.1, 3, actor=ada)
    management.set_overlap_percent(team_store, "d", 40, ada.name, ada)
    settings = team_store.annotation.annotation_settings("d")
    assert (settings.overlap_share, settings.overlap) == (0.4, 3)  # the share changes, the annotators per pair stay
    assert management.overlap_line(settings).startswith("Now 40% (set by ada@example.org)")


def test_a_party_to_a_conflict_may_not_settle_it(local_store: Store) -> None:
    pair = local_store.datasets.find_candidate_id("d", "q1", "a")
    local_store.labels.add_label(pair, "alice", 3)
    local_store.labels.add_label(pair, "bob", 0)
    [conflict] = agreement.conflicts(local_store, "d")
    assert review.is_party(conflict, "alice") and not review.is_party(conflict, "rita")
    with pytest.raises(InputError, match="alice labelled q1 / a: another reviewer settles it"):
        review.settle(local_store, conflict, 2, "alice", None, LOCAL)
    with pytest.raises(InputError, match="choose or type your name"):
        review.settle(local_store, conflict, 2, None, None, LOCAL)
    assert local_store.labels.adjudications("d") == {}
    review.settle(local_store, conflict, 2, "rita", "  ", LOCAL)
    settled = local_store.labels.adjudications("d")[pair]
    assert (settled["value"], settled["adjudicator"], settled["note"]) == (2, "rita", None)  # a blank note is none


def test_queue_starts_on_train_and_judging_in_place_needs_a_dataset_question(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'dev_first.sqlite'}")
    try:
        pool = [Candidate("a", "Shakespeare wrote Hamlet.", label=1), Candidate("b", "Hamlet is a play.", label=0)]
        store.datasets.import_dataset(Dataset("d", [Question("q2", "who wrote it", pool, split="dev"),
                                           Question("q1", "who wrote hamlet", pool, split="train")]))
        assert workplace.queue_splits(store, "d") == (["dev", "train"], 1)
        with pytest.raises(InputError, match="a typed question's candidates belong to other questions"):
            workplace.judge_in_place(store, "d", None, "q1/a", 3, "alice", LOCAL)
        with pytest.raises(InputError, match="type your name"):
            workplace.judge_in_place(store, "d", "q1", "a", 3, None, LOCAL)
        workplace.judge_in_place(store, "d", "q1", "a", 3, "alice", LOCAL)
        assert workplace.annotators(store, "d") == ["alice"]
        assert workplace.undo_in_place(store, "d", "alice", LOCAL)["value"] == 3
        assert workplace.annotators(store, "d") == []
    finally:
        store.close()
