"""Training jobs in the store: status, progress events and the atomic hand-over of a new version.

A job row is written by three parties: the launcher (``qa_core.services.jobs.start_training_job``)
creates it and records the process id; the job process marks it running, beats a heartbeat,
appends progress events and finally registers the model version AND marks the job succeeded in
one transaction (or marks it failed with the error); any reader marks a job failed when its
process is gone (same host: the pid no longer runs; any host: no heartbeat for
``HEARTBEAT_TIMEOUT_SECONDS``). Status changes are compare-and-set, so a late writer cannot undo
a reader's verdict: a job marked failed stays failed and its version is not registered.
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from db.base import StoreBase, check_annotator, insert_model_version, jsonable, now
from db.models import TrainingEventRow, TrainingJobRow
from qa_core.training.events import TrainingEvent
from qa_core.types import InputError

ACTIVE_STATUSES = ("queued", "running")


@dataclass(frozen=True)
class RecordedEvent:
    """A stored progress event: its id (for incremental polling), when it came, and the event."""

    id: int
    created_at: datetime
    event: TrainingEvent

HEARTBEAT_TIMEOUT_SECONDS = 90.0
FINISH_ATTEMPTS = 5  # concurrent registrations of one model name: see ``insert_model_version``


class JobStore(StoreBase):
    """Training jobs and their events (mixed into ``db.store.Store``)."""

    def create_job(self, model: str, dataset: str, params: dict[str, Any]) -> int:
        """A new ``queued`` job; ``params`` is everything the job process needs (JSON)."""
        model, dataset = check_annotator(model, "model"), check_annotator(dataset, "dataset")
        with self.session_scope() as session:
            return session.scalar(
                insert(TrainingJobRow)
                .values(model=model, dataset=dataset, params=jsonable(params), status="queued", heartbeat_at=now())
                .returning(TrainingJobRow.id)
            )

    def set_job_process(self, job_id: int, pid: int, host: str | None = None) -> None:
        """Record the job's process (the launcher calls this right after spawning it)."""
        with self.session_scope() as session:
            session.execute(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == job_id, TrainingJobRow.status == "queued")
                .values(pid=pid, host=host or socket.gethostname())
            )

    def start_job(self, job_id: int, pid: int | None = None, host: str | None = None) -> dict[str, Any]:
        """Mark a queued job running in this process and return it; ``InputError`` if it is not
        queued (already run, failed, or unknown), so a job never runs twice."""
        at = now()
        with self.session_scope() as session:
            result = session.execute(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == job_id, TrainingJobRow.status == "queued")
                .values(
                    status="running",
                    pid=pid or os.getpid(),
                    host=host or socket.gethostname(),
                    started_at=at,
                    heartbeat_at=at,
                    phase="starting",
                )
            )
            if result.rowcount != 1:
                row = session.get(TrainingJobRow, job_id)
                state = "does not exist" if row is None else f"is {row.status}"
                raise InputError(f"training job {job_id} {state}; only a queued job can start")
            return _job_dict(session.get(TrainingJobRow, job_id))

    def job_heartbeat(self, job_id: int, phase: str | None = None) -> None:
        """Say the running job is alive (and what it is doing, e.g. "training")."""
        values: dict[str, Any] = {"heartbeat_at": now()}
        if phase is not None:
            values["phase"] = phase
        with self.session_scope() as session:
            session.execute(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == job_id, TrainingJobRow.status == "running")
                .values(**values)
            )

    def add_job_event(self, job_id: int, event: TrainingEvent) -> int:
        """Append one progress point (NaN becomes null) and beat the heartbeat; returns its id."""
        at = now()
        with self.session_scope() as session:
            event_id = session.scalar(
                insert(TrainingEventRow)
                .values(
                    job_id=job_id,
                    created_at=at,
                    step=_optional_int(event.step),
                    total=_optional_int(event.total),
                    unit=event.unit,
                    batch=_optional_int(event.batch),
                    loss=_finite(event.loss),
                    dev_map=_finite(event.dev_map),
                    detail=jsonable(dict(event.detail)) if event.detail else None,
                )
                .returning(TrainingEventRow.id)
            )
            session.execute(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == job_id, TrainingJobRow.status == "running")
                .values(heartbeat_at=at)
            )
            return event_id

    def finish_job(
        self,
        job_id: int,
        *,
        kind: str,
        checkpoint_path: str | Path,
        training_data: dict[str, Any],
        metrics: dict[str, Any],
        promote: bool = False,
    ) -> int:
        """Register the job's model as the next version of its name (promoted for the job's dataset
        only if asked) and mark the job succeeded, in ONE transaction; returns the ``model_versions`` id.

        ``InputError`` (and nothing registered) when the job is no longer running, e.g. a reader
        declared it dead.
        """
        for attempt in range(1, FINISH_ATTEMPTS + 1):
            try:
                with self.session_scope() as session:
                    job = session.get(TrainingJobRow, job_id)
                    if job is None:
                        raise InputError(f"training job {job_id} does not exist")
                    version_id = insert_model_version(
                        session, job.model, kind, checkpoint_path, training_data, metrics,
                        job.dataset if promote else None,
                    )
                    result = session.execute(
                        update(TrainingJobRow)
                        .where(TrainingJobRow.id == job_id, TrainingJobRow.status == "running")
                        .values(status="succeeded", phase="done", finished_at=now(), model_version_id=version_id)
                    )
                    if result.rowcount != 1:
                        raise InputError(f"training job {job_id} is no longer running; its model is not registered")
                    return version_id
            except IntegrityError:
                if attempt == FINISH_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def fail_job(self, job_id: int, error: str) -> bool:
        """Mark a queued or running job failed with ``error``; returns whether it was active."""
        with self.session_scope() as session:
            result = session.execute(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == job_id, TrainingJobRow.status.in_(ACTIVE_STATUSES))
                .values(status="failed", finished_at=now(), error=error)
            )
            return result.rowcount == 1

    def job(self, job_id: int) -> dict[str, Any]:
        """One job as a dict (see ``jobs``), after marking it failed if its process died."""
        with self.session_scope() as session:
            row = session.get(TrainingJobRow, job_id)
            if row is None:
                raise InputError(f"no training job with id {job_id}")
        if self._found_dead(row):  # re-read: failed now, or it ended by itself meanwhile
            with self.session_scope() as session:
                row = session.get(TrainingJobRow, job_id)
        return _job_dict(row)

    def jobs(self, model: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The newest jobs first (of ``model`` if given); dead processes are marked failed first.

        Each dict: id, model, dataset, params, status (queued/running/succeeded/failed), phase,
        pid, host, created_at, started_at, heartbeat_at, finished_at, error, model_version_id.
        """
        query = select(TrainingJobRow).order_by(TrainingJobRow.id.desc()).limit(limit)
        if model is not None:
            query = query.where(TrainingJobRow.model == model)
        with self.session_scope() as session:
            rows = list(session.scalars(query))
        if any([self._found_dead(row) for row in rows]):
            with self.session_scope() as session:
                rows = list(session.scalars(query))
        return [_job_dict(row) for row in rows]

    def job_events(self, job_id: int, after_id: int = 0) -> list[RecordedEvent]:
        """The job's progress points after event ``after_id`` (for incremental polling), oldest first."""
        with self.session_scope() as session:
            rows = session.scalars(
                select(TrainingEventRow)
                .where(TrainingEventRow.job_id == job_id, TrainingEventRow.id > after_id)
                .order_by(TrainingEventRow.id)
            )
            return [
                RecordedEvent(
                    row.id,
                    row.created_at,
                    TrainingEvent(row.step or 0, row.total, row.unit, row.batch, row.loss, row.dev_map, row.detail or {}),
                )
                for row in rows
            ]

    def _found_dead(self, row: TrainingJobRow) -> bool:
        """Mark an active job whose process is gone failed; returns whether the process was gone
        (the row read is stale then, even if the job reported its result just before dying)."""
        if row.status not in ACTIVE_STATUSES:
            return False
        reason = None
        if row.pid is not None and row.host == socket.gethostname() and not process_alive(row.pid):
            reason = f"the training process (pid {row.pid}) ended without reporting a result (killed or crashed)"
        else:
            last_sign = row.heartbeat_at or row.created_at
            if now() - last_sign > timedelta(seconds=HEARTBEAT_TIMEOUT_SECONDS):
                reason = f"no heartbeat from the training process since {last_sign:%Y-%m-%d %H:%M:%S} UTC"
        if reason is None:
            return False
        self.fail_job(row.id, reason)
        return True


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs on this host (a zombie, i.e. dead but not yet reaped, counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no procfs (not Linux): trust the signal check
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _optional_int(value: int | None) -> int | None:
    return None if value is None else int(value)


def _job_dict(row: TrainingJobRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "model": row.model,
        "dataset": row.dataset,
        "params": row.params,
        "status": row.status,
        "phase": row.phase,
        "pid": row.pid,
        "host": row.host,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "heartbeat_at": row.heartbeat_at,
        "finished_at": row.finished_at,
        "error": row.error,
        "model_version_id": row.model_version_id,
    }
