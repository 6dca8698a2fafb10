"""Training a ranker and registering it as the next version of its model: the one path of the CLI's
``train`` and of a training job (models context).

``train_and_register`` trains (``experiments.train_ranker``), writes the version's record
(``experiments.version_record``: the same training data and metrics whoever trained it) and
registers it through ``register_version``, the one function that registers a trained version: a
command line registration on its own (``store.models.register_model``), a job's together with marking the
job succeeded, in the job's last transaction (``store.jobs.finish_job``), so a job that lost its claim
registers nothing. Question classifiers register through ``register_version`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from db.base import NewVersion
from qa_core.services.analysis import analyzer_for
from qa_core.services.experiments import EVAL_SPLIT, TrainingOutcome, train_ranker, version_record

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.access import Actor
    from qa_core.training.events import TrainingEvent
    from qa_core.types import Dataset, Question


@dataclass(frozen=True)
class TrainingPlan:
    """What to train and how: the settings a version records and ``reproduce`` trains it again from."""

    model: str
    seed: int = 1
    train_split: str = "train"
    dev_split: str = "dev"
    config: dict[str, Any] = field(default_factory=dict)  # the model's setting changes (``registry.create``)
    promote: bool = False  # for the dataset it is trained on


@dataclass(frozen=True)
class JobClaim:
    """The training job a registration finishes, and the attempt that must still hold it."""

    job_id: int
    claim: str | None


@dataclass(frozen=True)
class TrainedVersion:
    version_id: int  # ``model_versions.id``
    outcome: TrainingOutcome


def register_version(
    store: Store,
    model: str,
    checkpoint: Path | str,
    training_data: dict[str, Any],
    metrics: dict[str, Any],
    *,
    promote: bool,
    job: JobClaim | None = None,
    actor: Actor | None = None,
) -> int:
    """Register ``checkpoint`` as the next version of ``model`` (its kind too), promoted for the
    dataset it was trained on with ``promote``; returns its ``model_versions`` id. With ``job``, the
    same transaction marks the job succeeded, and nothing is registered when the attempt no longer
    holds it (``InputError``). ``actor`` needs the right to train (and to promote)."""
    new = NewVersion(kind=model, checkpoint_path=str(checkpoint), training_data=training_data, metrics=metrics,
                     promote=promote)
    if job is None:
        return store.models.register_model(model, new, actor=actor)
    return store.jobs.finish_job(job.job_id, new, claim=job.claim, actor=actor)


def train_and_register(
    store: Store,
    plan: TrainingPlan,
    dataset: Dataset,
    *,
    checkpoint: Path,
    extra: dict[str, Any],
    gold_eval: Sequence[Question] | None = None,
    progress: bool = False,
    callback: Callable[[TrainingEvent], None] | None = None,
    phase: Callable[[str], None] = lambda what: None,
    job: JobClaim | None = None,
    actor: Actor | None = None,
) -> TrainedVersion:
    """Train ``plan.model`` on ``dataset`` into ``checkpoint`` and register it (``register_version``).

    ``gold_eval``: the questions of ``EVAL_SPLIT`` with their gold labels (default: ``dataset``'s own,
    where its labels are gold); ``extra``: what the version's ``training_data`` records besides
    (who trained it, from which labels). ``callback`` gets the ``TrainingEvent``s; ``phase`` is told
    "evaluating" and "registering" as training ends (a job's heartbeat, which raises once the
    attempt lost the job)."""
    splits = {"seed": plan.seed, "train_split": plan.train_split, "dev_split": plan.dev_split}
    outcome = train_ranker(plan.model, dataset, **splits, progress=progress, callback=callback, checkpoint=checkpoint,
                           model_config=plan.config, analyzer=analyzer_for(store, plan.model, plan.config))
    phase("evaluating")
    gold_eval = dataset.split(EVAL_SPLIT) if gold_eval is None else gold_eval
    training_data, metrics = version_record(outcome, dataset, gold_eval, **splits, extra=extra)
    phase("registering")
    version_id = register_version(store, plan.model, outcome.checkpoint, training_data, metrics,
                                  promote=plan.promote, job=job, actor=actor)
    return TrainedVersion(version_id, outcome)
