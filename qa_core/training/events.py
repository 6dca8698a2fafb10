"""The one progress event of every training run (rankers and question classifiers alike).

A training loop calls its ``ProgressCallback`` with a ``TrainingEvent``; the job store records
exactly these fields (``db.jobs.JobStore.add_job_event``) and the Train page draws them, so a new
model's progress shows up without touching either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TrainingEvent:
    """One progress point.

    ``step`` counts what the training advances by, named by ``unit``: epochs for the neural models
    (several events per epoch, one per dev check), grid points for the tree kernel's SVM. ``total``
    is the planned number of steps (early stopping may end sooner), ``batch`` the mini-batches seen,
    ``loss`` the mean training loss since the previous event, ``dev_map`` the dev MAP at this point,
    ``detail`` what else the model reports (e.g. the grid point's C and decays).
    """

    step: int
    total: int | None = None
    unit: str = "epoch"
    batch: int | None = None
    loss: float | None = None
    dev_map: float | None = None
    detail: Mapping[str, float] = field(default_factory=dict)

    @property
    def fraction(self) -> float | None:
        """How far along the planned steps (0..1), ``None`` when nothing is planned."""
        if not self.total:
            return None
        return min(1.0, self.step / self.total)


ProgressCallback = Callable[[TrainingEvent], None]
