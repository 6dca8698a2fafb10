"""Scoring a dataset for a model-based queue order in the background, question by question.

The uncertainty and disagreement orders need a model's score of every pair; a slow model (the
tree kernel: 78 s for the demo) would hold the Label page on a spinner. ``BackgroundScores``
scores in a daemon thread, a few questions at a time, and ``snapshot()`` hands out what is scored
so far: the strategies place scored pairs first and unscored ones last (``strategies``), so
labelling starts on the scored part at once and the order sharpens as scoring goes on. The page
draws ``progress()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from qa_core.services.labeling.strategies import TextRecord, model_scores
from qa_core.types import InputError

if TYPE_CHECKING:
    from qa_core.rankers.base import Ranker

log = logging.getLogger(__name__)

QUESTIONS_PER_STEP = 8  # small enough that the first pairs are ready within a second or two


class ScoringProgress(NamedTuple):
    scored: int  # pairs scored so far
    total: int
    error: str | None  # why scoring stopped early, for the page

    @property
    def done(self) -> bool:
        return self.scored >= self.total or self.error is not None


class BackgroundScores:
    """One model's scores of a dataset's pairs, filled in by a background thread."""

    def __init__(self, ranker: Ranker, records: Sequence[TextRecord], questions_per_step: int = QUESTIONS_PER_STEP):
        self._lock = threading.Lock()
        self._scores: dict[int, float] = {}
        self._error: str | None = None
        self._total = len(records)
        groups: dict[str, list[TextRecord]] = {}
        for record in records:
            groups.setdefault(record.qid, []).append(record)
        steps = list(groups.values())
        self._steps = [
            [record for group in steps[i : i + questions_per_step] for record in group]
            for i in range(0, len(steps), questions_per_step)
        ]
        self._thread = threading.Thread(target=self._run, args=(ranker,), daemon=True, name="label-scores")
        self._thread.start()

    def _run(self, ranker: Ranker) -> None:
        for step in self._steps:
            try:
                scored = model_scores(ranker, step)
            except InputError as error:  # e.g. a text the model refuses: say so, keep what is scored
                with self._lock:
                    self._error = str(error)
                return
            except Exception as error:  # a background thread has nobody to raise to: log and report
                log.exception("background scoring failed")
                with self._lock:
                    self._error = f"scoring failed: {error}"
                return
            with self._lock:
                self._scores.update(scored)

    def snapshot(self) -> dict[int, float]:
        """The scores so far (a copy)."""
        with self._lock:
            return dict(self._scores)

    def progress(self) -> ScoringProgress:
        with self._lock:
            return ScoringProgress(len(self._scores), self._total, self._error)

    def wait(self, timeout: float | None = None) -> ScoringProgress:
        """Block until scoring ends (tests, scripts) and return the final progress."""
        self._thread.join(timeout)
        return self.progress()
