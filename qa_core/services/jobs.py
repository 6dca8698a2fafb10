"""Training jobs in their own OS process, and loading the registry's promoted model safely.

``start_training_job`` records a job in the store and, with the default runner (``process``),
runs ``python -m qa_core.services.job_runner ID`` detached from the caller, so a page never freezes and a
crash or a kill of the training cannot touch the app's process. With ``RERANK_LAB_JOB_RUNNER=worker``
the job waits in the store's queue instead, for ``python -m qa_core worker``
(``qa_core.services.worker``) on this machine or any other; the Train page polls the store either
way and shows the same. The attempt that claimed the job (``run_claimed``) trains on the store's
labels (``qa_core.services.labeling.training_dataset``), reports progress events, and at the end
registers the new version and marks the job succeeded in one transaction
(``qa_core.services.registration``, the CLI's ``train`` registers through it too); the checkpoint file is
written atomically before that. Whatever happens before that transaction commits, the registry,
and so the promoted model, is untouched: a killed run leaves at most an unreferenced checkpoint
file (``python -m qa_core gc`` deletes it), and a killed worker's job goes back to the queue.

``load_promoted`` loads a model's promoted version and, when its checkpoint is missing or
corrupt, falls back to the most recently promoted loadable version before it (then the newest
other loadable version), saying which version it uses.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from db.base import promotion_scope, serves
from db.jobs import LEASE_SECONDS, ClaimLost
from qa_core import config
from qa_core.checkpoints import Registration, new_checkpoint_path
from qa_core.rankers import registry
from qa_core.types import InputError, NotTrainedError

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.access import Actor
    from qa_core.rankers.base import Ranker
    from qa_core.training.events import TrainingEvent

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 5.0

# Launched processes, kept so that they are reaped when they end (no zombies in a long-lived app).
_children: dict[int, subprocess.Popen[bytes]] = {}


class CheckpointFallbackWarning(UserWarning):
    """The promoted version could not be loaded and an earlier one is used instead."""


# ---------------------------------------------------------------------- launching


def start_training_job(
    store: Store,
    model: str,
    dataset: str,
    *,
    store_labels: bool = True,
    gold: bool | Collection[str] = False,
    seed: int = 1,
    train_split: str = "train",
    dev_split: str = "dev",
    model_config: dict[str, Any] | None = None,
    promote: bool = False,
    runner: str | None = None,
    actor: Actor | None = None,
) -> int:
    """Queue a training of ``model`` on ``dataset`` and start its process (``runner``, default
    ``config.job_runner()``: ``process``), or leave it to the workers (``worker``); returns the job id.

    Labels: with ``store_labels`` the stored labels by the rule of
    ``qa_core.services.labeling.training_labels`` (adjudication, then majority), with ``gold`` filling the
    gaps (``True``: every split; split names: only those); without ``store_labels`` the
    dataset's gold labels only. The new version is registered unpromoted unless ``promote``.
    ``actor`` must be allowed to train (and to promote, with ``promote``); the store checks and
    records it before any process starts.
    Poll ``store.jobs.job(id)`` and ``store.jobs.job_events(id)`` for status and progress.
    """
    if not registry.ranker_class(model).capabilities.trainable:
        raise InputError(f"model {model!r} has nothing to train")
    store.datasets.dataset_summary(dataset)  # InputError naming the known datasets
    if store.engine.dialect.name == "sqlite" and store.engine.url.database in (None, "", ":memory:"):
        raise InputError("a training job runs in its own process and cannot reach an in-memory SQLite store")
    if not store_labels and gold is False:
        raise InputError("choose the labels to train on: the stored labels, the gold labels, or both")
    params = {
        "store_labels": store_labels,
        "gold": gold if isinstance(gold, bool) else sorted({gold} if isinstance(gold, str) else set(gold)),
        "seed": seed,
        "train_split": train_split,
        "dev_split": dev_split,
        "config": dict(model_config or {}),
        "promote": promote,
    }
    runner = runner or config.job_runner()
    job_id = store.jobs.create_job(model, dataset, params, runner=runner, actor=actor)
    if runner != "worker":
        _start_process(store, job_id, actor)
    return job_id


def _start_process(store: Store, job_id: int, actor: Actor | None) -> None:
    """The job's own detached process (``job_runner``), its output in the job's log; a process that
    cannot start fails the job with the reason."""
    try:
        with open(job_log_path(job_id), "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "qa_core.services.job_runner", str(job_id)],
                cwd=config.PROJECT_ROOT,
                # The URL goes through the environment, not argv, which every user can read; the
                # caller's PYTHONPATH stays behind the project (rankers of packages installed there).
                env={**os.environ, "RERANK_LAB_DB": store.url,
                     "PYTHONPATH": os.pathsep.join(filter(None, [str(config.PROJECT_ROOT), os.environ.get("PYTHONPATH")]))},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C on the app does not kill the training
            )
    except OSError as error:
        store.jobs.fail_job(job_id, f"the training process could not start: {error}", actor=actor)
        raise InputError(f"the training process could not start: {error}") from error
    store.jobs.set_job_process(job_id, process.pid, socket.gethostname(), actor=actor)
    _children[job_id] = process
    threading.Thread(target=_reap, args=(job_id, process), name=f"reap-job-{job_id}", daemon=True).start()


def _reap(job_id: int, process: subprocess.Popen[bytes]) -> None:
    process.wait()
    _children.pop(job_id, None)


def job_log_path(job_id: int) -> Path:
    """Where the job process's output goes (tracebacks of unexpected failures end up there)."""
    folder = config.data_dir() / "jobs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"job-{job_id}.log"


def cancel_job(store: Store, job_id: int, *, actor: Actor | None = None) -> bool:
    """Mark a queued or running job failed and stop it; returns whether it was still active. A job
    process on this host gets SIGTERM; a worker (which serves other jobs too) sees at its next
    progress event or heartbeat that it no longer holds the job, and drops it. The promoted model
    is untouched. Needs the right to train."""
    store.jobs.job(job_id)  # a job whose process died is marked failed first
    job = store.jobs.cancel_job(job_id, actor=actor)
    if job is None:
        return False
    if job["runner"] == "process" and job["pid"] is not None and job["host"] == socket.gethostname():
        try:
            os.kill(job["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
    return True


def wait_for_job(store: Store, job_id: int, timeout: float = 600.0, poll_seconds: float = 0.2) -> dict[str, Any]:
    """Block until the job has ended and return it (scripts and tests; a page polls ``store.jobs.job``)."""
    deadline = time.monotonic() + timeout
    process = _children.get(job_id)
    if process is not None:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    while (job := store.jobs.job(job_id))["status"] in ("queued", "running"):
        if time.monotonic() > deadline:
            raise InputError(f"training job {job_id} did not finish within {timeout:.0f} s")
        time.sleep(poll_seconds)
    return job


def progress_fraction(job: dict[str, Any], events: list[TrainingEvent]) -> float:
    """0..1 for a progress bar: 1 once the job has ended, else how far the last event is along the
    planned steps (epochs, grid points; early stopping can end the job sooner)."""
    if job["status"] not in ("queued", "running"):
        return 1.0
    return (events[-1].fraction or 0.0) if events else 0.0


# ---------------------------------------------------------------------- the job process


def run_job(store: Store, job_id: int, *, actor: Actor | None = None) -> int:
    """Run the queued job ``job_id`` in this process (``python -m qa_core.services.job_runner ID``):
    ``actor`` (the operator running the process) claims it and writes its progress; the version is
    registered as the job's creator (``JobStore.finish_job``)."""
    return run_claimed(store, store.jobs.start_job(job_id, actor=actor), actor=actor)


def run_claimed(store: Store, job: dict[str, Any], lease_seconds: float = LEASE_SECONDS, *,
                actor: Actor | None = None) -> int:
    """Run ``job``, claimed by this process (``JobStore.start_job`` / ``claim_job``), renewing its
    lease every ``HEARTBEAT_SECONDS``; returns the new ``model_versions`` id. ``actor`` (who runs it)
    writes its progress; the job trains and registers only while the user who queued it may (checked
    before the training and in the registration's transaction). A failure marks the
    job failed with its message and re-raises; an interrupt (Ctrl-C, SIGTERM to a worker) gives a
    worker's job back to the queue; ``ClaimLost`` when the attempt lost the job meanwhile (nothing
    more is written for it)."""
    job_id, claim = job["id"], job["claim"]
    lost, stop = threading.Event(), threading.Event()
    heartbeat = threading.Thread(target=_beat, args=(store, job_id, claim, lease_seconds, lost, stop, actor),
                                 name="heartbeat", daemon=True)
    heartbeat.start()
    where = job_log_path(job_id) if job["runner"] == "process" else f"the log of worker {job['host']}:{job['pid']}"
    try:
        return _train(store, job, lease_seconds, lost, actor)
    except ClaimLost:
        raise
    except (InputError, NotTrainedError) as error:
        store.jobs.fail_job(job_id, str(error), claim=claim, actor=actor)
        raise
    except (KeyboardInterrupt, SystemExit) as error:
        store.jobs.give_back(job_id, claim, f"{type(error).__name__} in {where} during attempt {job['attempts']}", actor=actor)
        raise
    except BaseException as error:
        store.jobs.fail_job(job_id, f"{type(error).__name__}: {error} (traceback in {where})", claim=claim, actor=actor)
        raise
    finally:
        stop.set()


def _train(store: Store, job: dict[str, Any], lease_seconds: float, lost: threading.Event, actor: Actor | None) -> int:
    from qa_core.services.experiments import EVAL_SPLIT
    from qa_core.services.labeling import training_dataset
    from qa_core.services.registration import JobClaim, TrainingPlan, train_and_register

    job_id, model, name, params, claim = job["id"], job["model"], job["dataset"], job["params"], job["claim"]

    def phase(what: str) -> None:
        if lost.is_set() or not store.jobs.job_heartbeat(job_id, what, claim=claim, lease_seconds=lease_seconds, actor=actor):
            raise ClaimLost(f"training job {job_id} is no longer held by {claim}")

    def progress(event: TrainingEvent) -> None:
        if lost.is_set():
            raise ClaimLost(f"training job {job_id} is no longer held by {claim}")
        store.jobs.add_job_event(job_id, event, claim=claim, lease_seconds=lease_seconds, actor=actor)

    store.jobs.job_creator(job_id)  # a creator demoted since the job was queued: refused before the training
    phase("loading labels")
    source: dict[str, Any]
    if params["store_labels"]:
        dataset, resolved = training_dataset(store, name, gold=params["gold"])
        source = {"labels": resolved.counts(), "conflicts": len(resolved.conflicts)}
    else:
        dataset, source = store.datasets.load_dataset(name), {"labels": "gold"}
    # Checked here, before the seconds of loading models, so a job without labels fails at once.
    for split, purpose in ((params["train_split"], "train on"), (params["dev_split"], "select the model on")):
        if not any(c.label is not None for q in dataset.split(split) for c in q.candidates):
            raise InputError(
                f"no labels to {purpose} in split {split!r} of dataset {name!r}: "
                "label some of its pairs, or include its gold labels"
            )
    phase("training")
    plan = TrainingPlan(model, params["seed"], params["train_split"], params["dev_split"], params["config"],
                        params["promote"])
    return train_and_register(
        store,
        plan,
        dataset,
        checkpoint=new_checkpoint_path(model, name, f"job{job_id}", owner=store.store_id),
        extra={"job": job_id, "gold": params["gold"], "config": params["config"], **source},
        gold_eval=store.datasets.load_dataset(name, split=EVAL_SPLIT).questions,
        callback=progress,
        phase=phase,
        job=JobClaim(job_id, claim),
        actor=actor,
    ).version_id


def _beat(store: Store, job_id: int, claim: str, lease_seconds: float, lost: threading.Event,
          stop: threading.Event, actor: Actor | None) -> None:
    """Renew the lease until ``stop``; set ``lost`` when the attempt no longer holds the job."""
    while not stop.wait(HEARTBEAT_SECONDS):
        try:
            if not store.jobs.job_heartbeat(job_id, claim=claim, lease_seconds=lease_seconds, actor=actor):
                lost.set()
                return
        except Exception:  # a missed beat is harmless while the lease lasts; the next one will come
            logger.exception("heartbeat of job %s failed", job_id)


# ---------------------------------------------------------------------- loading the promoted model


@dataclass
class LoadedModel:
    """A ranker loaded from the registry, the version it came from, and what went wrong first."""

    ranker: Ranker
    version: dict[str, Any]  # the ``model_versions`` record actually loaded
    wanted: dict[str, Any]  # the promoted (else newest) record
    notice: str | None = None  # set when ``version`` is a fallback: say it on the page


def _same_model(version: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """A fallback for ``wanted``: the same kind of model, trained on the same dataset."""
    return version["kind"] == wanted["kind"] and promotion_scope(version["training_data"] or {}) == promotion_scope(
        wanted["training_data"] or {})


def _fallbacks(store: Store, name: str, dataset: str, wanted: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The versions ``load_promoted`` tries after ``wanted``, in order, read from the store only once
    ``wanted`` failed to load (a load that works asks nothing more than the version in use)."""
    earlier = [v for v in store.models.promotion_history(name, dataset) if v["id"] != wanted["id"]]
    tried = {wanted["id"], *(e["id"] for e in earlier)}
    trained_here = [v for v in reversed(store.models.model_versions(name)) if serves(v["training_data"], dataset) and v["id"] not in tried]
    yield from (v for v in (*earlier, *trained_here) if _same_model(v, wanted))


def load_promoted(store: Store, name: str, dataset: str, wanted: dict[str, Any] | None = None) -> LoadedModel:
    """Load the version of ``name`` that ``dataset`` uses (``store.models.promoted_model``, unless the caller
    read it already: ``wanted``); if its
    checkpoint is missing or refused (damaged, or not the file registered: another content hash,
    kind or model name), the version promoted for ``dataset`` before it, then the newest other
    version trained on ``dataset``, each checked the same way: only versions of the same kind
    trained on the same dataset as the one wanted, never, silently, one trained for another dataset.
    ``NotTrainedError`` without any such version; ``InputError`` when none loads."""
    wanted = wanted or store.models.promoted_model(name, dataset)
    if wanted is None:
        raise NotTrainedError(f"model {name!r} has no version trained on or promoted for dataset {dataset!r}")
    failures: list[str] = []
    for record in chain([wanted], _fallbacks(store, name, dataset, wanted)):
        try:
            ranker = registry.load(Path(record["checkpoint_path"]), Registration.of(record))
        except InputError as error:
            failures.append(f"version {record['version']}: {error}")
            continue
        notice = None
        if record is not wanted:  # said once, by whoever shows it (a page, the CLI), not logged here too
            notice = (
                f"model {name!r} {failures[0]}; it could not be loaded, "
                f"so version {record['version']} is used instead"
            )
        return LoadedModel(ranker, record, wanted, notice)
    raise InputError(f"no version of model {name!r} could be loaded: " + "; ".join(failures))
