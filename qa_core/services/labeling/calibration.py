"""Calibration of new annotators (issue 21, item 1): a few gold pairs first, then their agreement
with gold, before real work (Label Studio's and Prodigy's "ground truth" onboarding).

The rules (docs/annotation.md):

- **When**: while calibration is on for the dataset (``CalibrationStore.set_calibration``, by whoever manages
  it), a new annotator there (no calibration record, and fewer current labels in the dataset than
  the run has pairs: one who has already labelled that much is not new) judges the gold pairs in
  the graded mode before any real pair. A run keeps the settings it started under (its size), so changing the
  number later does not move anyone's finish line; a finished run is never asked again, and a run
  left half-way goes on where it stopped (while calibration is on).
- **Which pairs** (``gold_pairs``): the dataset's pairs with a gold label, from its TRAIN split
  (every split when it has no TRAIN pair with gold: TEST is never shown unless there is nothing
  else), ranked by a stable hash of (``SEED``, qid, doc_id), so every annotator judges the same
  pairs, and a re-import that keeps the ids keeps them. The set takes relevant (gold > 0) and not
  relevant pairs in turn while both last, so kappa has both classes to work with; the rest fill
  from whichever class remains.
- **In which order** (``shown_order``): a hash of (``SEED``, annotator, qid, doc_id), so each
  annotator's order is their own and cannot be learnt: a fixed pattern of keys (relevant first,
  then alternating) does not score 100%. It is stable, so a run left half-way resumes in order.
- **The result** (``calibration_result``): on the gold scale. Binary gold (every gold label 0 or 1,
  as WikiQA and TrecQA) is compared with the grade as training reads it (relevant when grade > 0,
  ``training_labels``); graded gold (0..4) with the grade itself. Reported: the pairs judged,
  the share whose grade equals gold on that scale (exact agreement), and scikit-learn's
  quadratic-weighted Cohen's kappa (``None`` where undefined: no variation), with the per-pair list.

Calibration judgements are stored apart from labels (``db/calibration.py``): they never become
training labels and never enter the agreement between annotators.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pandas as pd

from db.calibration import MAX_CALIBRATION_PAIRS as MAX_CALIBRATION_PAIRS  # the Label page's limit
from qa_core.services.labeling.agreement import cohen_kappa

if TYPE_CHECKING:
    from db.base import CandidateRecord
    from db.calibration import CalibrationJudgement
    from db.store import Store
    from qa_core.access import Actor

SEED = 0
CALIBRATION_SPLIT = "train"


def _rank(record: CandidateRecord, seed: int, annotator: str = "") -> bytes:
    """A stable hash of (seed, annotator, qid, doc_id): the same on every machine and in every process."""
    return hashlib.blake2b(f"{seed}:{annotator}:{record.qid}/{record.doc_id}".encode(), digest_size=8).digest()


def gold_pairs(records: Sequence[CandidateRecord], n: int, seed: int = SEED) -> list[CandidateRecord]:
    """The first ``n`` calibration pairs of ``records`` (see the module docstring for the rule)."""
    ranked = sorted((r for r in records if r.gold_label is not None), key=lambda r: _rank(r, seed))
    relevant = [r for r in ranked if r.gold_label > 0]
    other = [r for r in ranked if r.gold_label == 0]
    chosen: list[CandidateRecord] = []
    while len(chosen) < n and (relevant or other):
        for group in (relevant, other):
            if group and len(chosen) < n:
                chosen.append(group.pop(0))
    return chosen


def shown_order(pairs: Sequence[CandidateRecord], annotator: str, seed: int = SEED) -> list[CandidateRecord]:
    """``pairs`` in ``annotator``'s own order (see the module docstring)."""
    return sorted(pairs, key=lambda r: _rank(r, seed, annotator))


def binary_gold(records: Sequence[CandidateRecord]) -> bool:
    """Whether the dataset's gold labels are binary (0/1), so grades are compared as relevance."""
    return all(r.gold_label in (0, 1) for r in records if r.gold_label is not None)


def counted_as(grade: int, binary: bool) -> int:
    """A grade on the gold scale: relevance (grade > 0, as training reads it) for binary gold."""
    return int(grade > 0) if binary else grade


@dataclass(frozen=True)
class CalibrationPair:
    """One judged gold pair of a calibration."""

    qid: str
    doc_id: str
    grade: int
    counted_as: int
    gold: int

    @property
    def agrees(self) -> bool:
        return self.counted_as == self.gold


@dataclass(frozen=True)
class CalibrationResult:
    """An annotator's agreement with gold over their calibration judgements."""

    annotator: str
    pairs: list[CalibrationPair]
    run_pairs: int  # the pairs the run asks for
    binary: bool
    exact: float | None  # share of pairs whose grade (on the gold scale) equals gold
    weighted_kappa: float | None  # quadratic weights; None where undefined
    finished_at: datetime | None  # the last judgement, once the run is complete

    @property
    def complete(self) -> bool:
        return len(self.pairs) >= self.run_pairs


def calibration_result(
    annotator: str, judgements: Sequence[CalibrationJudgement], binary: bool
) -> CalibrationResult:
    """The result of one annotator's calibration judgements (pure: tests build them by hand)."""
    pairs = [CalibrationPair(j.qid, j.doc_id, j.value, counted_as(j.value, binary), j.gold) for j in judgements]
    run_pairs = judgements[0].run_pairs if judgements else 0
    graded = [p.counted_as for p in pairs]
    gold = [p.gold for p in pairs]
    complete = bool(pairs) and len(pairs) >= run_pairs
    return CalibrationResult(
        annotator=annotator,
        pairs=pairs,
        run_pairs=run_pairs,
        binary=binary,
        exact=sum(p.agrees for p in pairs) / len(pairs) if pairs else None,
        weighted_kappa=cohen_kappa(graded, gold, "quadratic") if pairs else None,
        finished_at=max(j.judged_at for j in judgements) if complete else None,
    )


def pair_table(result: CalibrationResult) -> pd.DataFrame:
    """The per-pair list the page shows after a calibration."""
    scale = "relevant (grade > 0)" if result.binary else "grade"
    return pd.DataFrame(
        [{"qid": p.qid, "doc_id": p.doc_id, "your grade": p.grade, f"as {scale}": p.counted_as, "gold": p.gold,
          "agrees": p.agrees} for p in result.pairs],
        columns=["qid", "doc_id", "your grade", f"as {scale}", "gold", "agrees"],
    )


def results_table(judgements: Sequence[CalibrationJudgement], binary: bool) -> pd.DataFrame:
    """Per annotator: their calibration against gold, for the agreement dashboard."""
    by_annotator: dict[str, list[CalibrationJudgement]] = {}
    for judgement in judgements:
        by_annotator.setdefault(judgement.annotator, []).append(judgement)
    columns = ["annotator", "pairs judged", "of", "exact agreement", "weighted κ", "finished"]
    rows = []
    for name, own in sorted(by_annotator.items()):
        result = calibration_result(name, own, binary)
        rows.append({"annotator": name, "pairs judged": len(result.pairs), "of": result.run_pairs,
                     "exact agreement": result.exact, "weighted κ": result.weighted_kappa,
                     "finished": result.finished_at})
    return pd.DataFrame(rows, columns=columns)


def calibration_records(store: Store, dataset: str) -> list[CandidateRecord]:
    """The pairs calibration draws from: the TRAIN split's, or every split's when TRAIN has no gold."""
    train = [r for r in store.datasets.candidate_rows(dataset, split=CALIBRATION_SPLIT) if r.gold_label is not None]
    return train or [r for r in store.datasets.candidate_rows(dataset) if r.gold_label is not None]


@dataclass
class Calibration:
    """One annotator's calibration in one dataset, read from the store (a page builds it on every
    rerun): the gold pairs still due, and the judgements made so far. Cheap when nothing is due
    (two small queries): the dataset's pairs are read only while a run is under way."""

    store: Store
    dataset: str
    annotator: str
    settings_id: int | None  # the run's settings (None: nothing due)
    due: list[CandidateRecord]
    total: int
    judgements: list[CalibrationJudgement]
    holder: str | None = None
    actor: Actor | None = None

    @classmethod
    def build(
        cls, store: Store, dataset: str, annotator: str, *, holder: str | None = None, actor: Actor | None = None
    ) -> Calibration:
        judgements = store.calibration.calibration_judgements(dataset, annotator)
        settings = store.calibration.calibration_settings(dataset)
        settings_id, run = (judgements[0].settings_id, judgements[0].run_pairs) if judgements else (
            settings.settings_id, settings.pairs)
        if not settings.enabled or len(judgements) >= run or (
            not judgements and len(store.labels.current_label_records(dataset, annotator)) >= run
        ):
            return cls(store, dataset, annotator, None, [], 0, judgements, holder, actor)
        chosen = shown_order(gold_pairs(calibration_records(store, dataset), run), annotator)
        judged = {j.candidate_id for j in judgements}
        return cls(store, dataset, annotator, settings_id, [r for r in chosen if r.candidate_id not in judged],
                   len(chosen), judgements, holder, actor)

    def result(self) -> CalibrationResult | None:
        """The annotator's calibration so far against gold (``None``: not started)."""
        if not self.judgements:
            return None
        return calibration_result(self.annotator, self.judgements, binary_gold(calibration_records(self.store, self.dataset)))

    @property
    def current(self) -> CandidateRecord | None:
        """The gold pair to show now (``None``: nothing due)."""
        return self.due[0] if self.due else None

    @property
    def position(self) -> int:
        """1-based position of the current pair in the run."""
        return self.total - len(self.due) + 1

    def hold_no_queue_pair(self) -> None:
        """Hand back the queue pair this session (``holder``) holds: none is held while calibrating."""
        if self.holder is not None:
            self.store.queue.release_claims(self.dataset, self.holder, actor=self.actor)

    def judge(self, record: CandidateRecord, grade: int, shown_at: datetime) -> bool:
        """Store the grade of the gold pair on screen (no longer due); whether it was the last one due."""
        if self.settings_id is None:
            raise ValueError("no calibration is due")
        self.store.calibration.record_calibration(record.candidate_id, grade, self.annotator, self.settings_id, shown_at,
                                      self.holder, actor=self.actor)
        self.due = [r for r in self.due if r.candidate_id != record.candidate_id]
        return not self.due
