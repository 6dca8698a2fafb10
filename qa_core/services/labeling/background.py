"""Scoring a dataset for a model-based queue order in the background, question by question.

The uncertainty and disagreement orders need a model's score of every pair; a slow model (the
tree kernel: 78 s for the demo) would hold the Label page on a spinner. ``BackgroundScores``
scores in a thread of its own, a few questions at a time, and ``snapshot()`` hands out what is
scored so far: the strategies place scored pairs first and unscored ones last (``strategies``), so
labelling starts on the scored part at once and the order sharpens as scoring goes on. The page
draws ``progress()``.

Each step is a task of a one-thread ``ThreadPoolExecutor`` that queues the next when it ends. At
interpreter exit, concurrent.futures lets the running step finish and refuses the next: a daemon
thread, as before, was cut off inside spaCy's native code and aborted the process ("libblis:
Aborting", exit status 134), while waiting for the whole dataset could take minutes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

from qa_core.services.labeling.strategies import TextRecord, model_scores
from qa_core.types import InputError

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.rankers.base import Ranker

log = logging.getLogger(__name__)

QUESTIONS_PER_STEP = 8  # small enough that the first pairs are ready within a second or two


class ScoringProgress(NamedTuple):
    scored: int  # pairs scored so far (a partial run's unranked pairs count once passed: they get no score)
    total: int
    error: str | None  # why scoring stopped early, for the page

    @property
    def done(self) -> bool:
        return self.scored >= self.total or self.error is not None


class BackgroundScores:
    """One model's scores of a dataset's pairs, filled in by a background thread."""

    @classmethod
    def of_dataset(cls, ranker: Ranker, store: Store, dataset: str) -> BackgroundScores:
        """Scores of every pair of ``dataset``, started now."""
        return cls(ranker, store.datasets.candidate_rows(dataset))

    def __init__(self, ranker: Ranker, records: Sequence[TextRecord], questions_per_step: int = QUESTIONS_PER_STEP):
        self._lock = threading.Lock()
        self._scores: dict[int, float] = {}
        self._passed = 0  # pairs of the steps done
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
        self._ended = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="label-scores")
        self._queue_step(ranker, 0)

    def _queue_step(self, ranker: Ranker, step: int) -> None:
        if step < len(self._steps):
            try:
                self._executor.submit(self._score_step, ranker, step)
                return
            except RuntimeError:  # the interpreter is exiting: no further step
                pass
        self._end()

    def _end(self, error: str | None = None) -> None:
        with self._lock:
            self._error = error
        self._ended.set()
        self._executor.shutdown(wait=False)

    def _score_step(self, ranker: Ranker, step: int) -> None:
        try:
            scored = model_scores(ranker, self._steps[step])
        except InputError as error:  # e.g. a text the model refuses: say so, keep what is scored
            self._end(str(error))
            return
        except Exception as error:  # a background thread has nobody to raise to: log and report
            log.exception("background scoring failed")
            self._end(f"scoring failed: {error}")
            return
        with self._lock:
            self._scores.update(scored)
            self._passed += len(self._steps[step])
        self._queue_step(ranker, step + 1)

    def snapshot(self) -> dict[int, float]:
        """The scores so far (a copy)."""
        with self._lock:
            return dict(self._scores)

    def progress(self) -> ScoringProgress:
        with self._lock:
            return ScoringProgress(self._passed, self._total, self._error)

    def wait(self, timeout: float | None = None) -> ScoringProgress:
        """Block until scoring ends (tests, scripts) and return the final progress."""
        self._ended.wait(timeout)
        return self.progress()
