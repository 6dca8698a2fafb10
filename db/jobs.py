"""Training jobs in the store: status, progress events, claims and the atomic hand-over of a new version.

A job row is written by three parties: the launcher (``qa_core.services.jobs.start_training_job``)
creates it; the process that runs it claims it (``start_job``: the process the launcher started
for it, runner ``process``; ``claim_job``: any worker, runner ``worker``), beats a heartbeat,
appends progress events and finally registers the model version AND marks the job succeeded in
one transaction (or marks it failed with the error); any reader notices a runner that is gone.

Claims. Each attempt holds the job under its own ``claim`` token, and every later write of that
attempt (heartbeat, event, result, failure) is conditional on the job still being running under
that token, so an attempt that lost its job (cancelled, or given back to the queue) writes
nothing more. Workers claim the oldest queued job in ONE statement, ``UPDATE ... WHERE id =
(SELECT ... FOR UPDATE SKIP LOCKED) AND status = 'queued'``: on PostgreSQL concurrent workers skip
the rows others are locking, on SQLite (no row locks) the statement takes the database's write
lock before it reads, so the second of two workers finds the job running and takes the next one.
A worker's claim is a lease (``LEASE_SECONDS``) that its heartbeats renew; a worker job whose
lease ran out (any host) or whose process is gone (this host) goes back to the queue, with the
lost attempt's progress events removed, until ``MAX_ATTEMPTS`` claims are lost, then fails.

A ``process`` job whose process is gone (same host: the pid no longer runs; any host: no
heartbeat for ``HEARTBEAT_TIMEOUT_SECONDS``) is marked failed. Status changes are compare-and-set,
so a late writer cannot undo a reader's verdict: a job marked failed stays failed and its version
is not registered.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from db.audit import authorize, authorize_creator, authorize_training, record
from db.base import (
    REGISTER_ATTEMPTS,
    NewVersion,
    StoreBase,
    check_annotator,
    insert_id,
    insert_model_version,
    jsonable,
    now,
    row_dict,
)
from db.models import TrainingEventRow, TrainingJobRow
from qa_core.access import SYSTEM, USER_KIND, Actor, Permission, Role
from qa_core.config import JOB_RUNNERS
from qa_core.training.events import TrainingEvent
from qa_core.types import InputError

ACTIVE_STATUSES = ("queued", "running")
WAITING_FOR_WORKER = "waiting for a worker (python -m qa_core worker)"


@dataclass(frozen=True)
class RecordedEvent:
    """A stored progress event: its id (for incremental polling), when it came, and the event."""

    id: int
    created_at: datetime
    event: TrainingEvent

HEARTBEAT_TIMEOUT_SECONDS = 90.0
LEASE_SECONDS = 30.0  # a worker's claim, renewed by every heartbeat (every 5 s)
MAX_ATTEMPTS = 3  # claims of one job lost to stopped workers before it fails


class ClaimLost(Exception):
    """The attempt no longer holds its job (cancelled, failed by a reader, or given back to the
    queue when its lease ran out): it must stop and write nothing more for it."""


def new_claim() -> str:
    """A claim token: where the attempt runs, and random, so no two attempts share one."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


class JobStore(StoreBase):
    """Training jobs and their events (mixed into ``db.store.Store``)."""

    def create_job(self, model: str, dataset: str, params: dict[str, Any], runner: str = "process", *,
                   actor: Actor | None = None) -> int:
        """A new ``queued`` job; ``params`` is everything the job process needs (JSON); ``runner``:
        ``process`` (the caller starts a process for it) or ``worker`` (a worker claims it). Needs the
        right to train (and to promote, when ``params["promote"]`` asks the job to promote its version);
        the job keeps who queued it, and registers its version as them (``finish_job``)."""
        model, dataset = check_annotator(model, "model"), check_annotator(dataset, "dataset")
        if runner not in JOB_RUNNERS:
            raise InputError(f"unknown job runner {runner!r}; choose one of: {', '.join(JOB_RUNNERS)}")
        with self.session_scope() as session:
            who = authorize_training(session, actor, promote=bool(params.get("promote")), team=self.team)
            job_id = insert_id(
                session, TrainingJobRow, model=model, dataset=dataset, params=jsonable(params), status="queued",
                heartbeat_at=now(), runner=runner, phase=WAITING_FOR_WORKER if runner == "worker" else "",
                created_by=who.name, created_by_kind=who.kind, created_by_user_id=who.user_id,
            )
            record(session, who, "train", model, {"job": job_id, "dataset": dataset, **params})
            return job_id

    def cancel_job(self, job_id: int, *, actor: Actor | None = None) -> dict[str, Any] | None:
        """Mark a queued or running job failed ("cancelled"; the audit trail says by whom) and return it, so the caller
        can stop its process; ``None`` when it had ended already. Needs the right to train."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.TRAIN, team=self.team)
            result = session.execute(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == job_id, TrainingJobRow.status.in_(ACTIVE_STATUSES))
                .values(status="failed", finished_at=now(), error="cancelled", claim=None, lease_until=None)
            )
            if result.rowcount != 1:
                return None
            row = session.get(TrainingJobRow, job_id)
            record(session, who, "cancel_job", row.model, {"job": job_id, "dataset": row.dataset})
            return row_dict(row)

    def set_job_process(self, job_id: int, pid: int, host: str | None = None, *, actor: Actor | None = None) -> None:
        """Record the job's process (the launcher calls this right after spawning it)."""
        with self.session_scope() as session:
            authorize(session, actor, Permission.TRAIN, team=self.team)
            session.execute(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == job_id, TrainingJobRow.status == "queued")
                .values(pid=pid, host=host or socket.gethostname())
            )

    def start_job(self, job_id: int, pid: int | None = None, host: str | None = None, *,
                  actor: Actor | None = None) -> dict[str, Any]:
        """Claim the queued job ``job_id`` for this process and return it (its ``claim`` included);
        ``InputError`` if it is not queued (already run, failed, or unknown), so a job never runs twice."""
        job = self._claim_queued(job_id, pid, host, LEASE_SECONDS, actor)
        if job is None:
            with self.session_scope() as session:
                row = session.get(TrainingJobRow, job_id)
                state = "does not exist" if row is None else f"is {row.status}"
            raise InputError(f"training job {job_id} {state}; only a queued job can start")
        return job

    def claim_job(self, lease_seconds: float = LEASE_SECONDS, pid: int | None = None, host: str | None = None, *,
                  actor: Actor | None = None) -> dict[str, Any] | None:
        """Claim the oldest queued worker job for this process (see the module docstring) and
        return it, its ``claim`` included; ``None`` when none is queued. Jobs of lost workers go
        back to the queue first."""
        self.release_lost_jobs(actor=actor)
        oldest_queued = (
            select(TrainingJobRow.id)
            .where(TrainingJobRow.status == "queued", TrainingJobRow.runner == "worker")
            .order_by(TrainingJobRow.id)
            .limit(1)
            .with_for_update(skip_locked=True)  # PostgreSQL; SQLite renders no FOR UPDATE
            .scalar_subquery()
        )
        return self._claim_queued(oldest_queued, pid, host, lease_seconds, actor)

    def _claim_queued(self, which: Any, pid: int | None, host: str | None, lease_seconds: float,
                      actor: Actor | None) -> dict[str, Any] | None:
        """Claim the job ``which`` (an id, or a subquery choosing one) if it is queued, under a new
        attempt, and return it; ``None`` when it is not queued (any more)."""
        with self.session_scope() as session:
            authorize(session, actor, Permission.TRAIN, team=self.team)
            job_id = session.scalar(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == which, TrainingJobRow.status == "queued")
                .values(**_claim_values(pid, host, lease_seconds))
                .returning(TrainingJobRow.id)
            )
            return None if job_id is None else row_dict(session.get(TrainingJobRow, job_id))

    def active_worker_jobs(self) -> int:
        """Worker jobs queued or running (a running one comes back to the queue if its worker stops)."""
        with self.session_scope() as session:
            return session.scalar(
                select(func.count()).select_from(TrainingJobRow)
                .where(TrainingJobRow.runner == "worker", TrainingJobRow.status.in_(ACTIVE_STATUSES))
            )

    def release_lost_jobs(self, *, actor: Actor | None = None) -> list[int]:
        """Give the running worker jobs whose worker is gone (lease ran out; on this host, the
        process ended) back to the queue, or fail them after ``MAX_ATTEMPTS``; returns their ids."""
        with self.session_scope() as session:
            rows = list(session.scalars(
                select(TrainingJobRow).where(TrainingJobRow.status == "running", TrainingJobRow.runner == "worker")
            ))
        return [
            row.id for row in rows
            if (reason := _worker_lost(row)) is not None and self.give_back(row.id, row.claim, reason, actor=actor)
        ]

    def give_back(self, job_id: int, claim: str | None, reason: str, *, actor: Actor | None = None) -> bool:
        """End attempt ``claim`` of a running job: a worker job goes back to the queue (its progress
        events go, the next attempt starts afresh) unless it has had ``MAX_ATTEMPTS``, then it fails
        like a process job. Returns whether the attempt still held the job."""
        with self.session_scope() as session:
            authorize(session, actor, Permission.TRAIN, team=self.team)
            row = session.get(TrainingJobRow, job_id)
            if row is None or row.status != "running" or row.claim != claim:
                return False
            again = row.runner == "worker" and row.attempts < MAX_ATTEMPTS
            values: dict[str, Any] = (
                {"status": "queued", "phase": f"queued again: {reason}", "pid": None, "host": None}
                if again else
                {"status": "failed", "finished_at": now(),
                 "error": reason if row.runner == "process" else f"{reason}; given up after {row.attempts} attempts"}
            )
            result = session.execute(
                update(TrainingJobRow)
                .where(TrainingJobRow.id == job_id, TrainingJobRow.status == "running", TrainingJobRow.claim == claim)
                .values(claim=None, lease_until=None, **values)
            )
            if result.rowcount == 1 and again:
                session.execute(delete(TrainingEventRow).where(TrainingEventRow.job_id == job_id))
            return result.rowcount == 1

    def job_heartbeat(self, job_id: int, phase: str | None = None, claim: str | None = None,
                      lease_seconds: float = LEASE_SECONDS, *, actor: Actor | None = None) -> bool:
        """Say the running job is alive (and what it is doing, e.g. "training") and renew its
        lease; with ``claim``, only while that attempt holds it. Returns whether it did."""
        values: dict[str, Any] = _beat_values(lease_seconds)
        if phase is not None:
            values["phase"] = phase
        with self.session_scope() as session:
            authorize(session, actor, Permission.TRAIN, team=self.team)
            result = session.execute(update(TrainingJobRow).where(*_holding(job_id, claim)).values(**values))
            return result.rowcount == 1

    def add_job_event(self, job_id: int, event: TrainingEvent, claim: str | None = None,
                      lease_seconds: float = LEASE_SECONDS, *, actor: Actor | None = None) -> int:
        """Append one progress point (NaN becomes null) and beat the heartbeat; returns its id.
        With ``claim``: ``ClaimLost``, and nothing appended, when that attempt no longer holds the job."""
        with self.session_scope() as session:
            authorize(session, actor, Permission.TRAIN, team=self.team)
            beat = session.execute(
                update(TrainingJobRow).where(*_holding(job_id, claim)).values(**_beat_values(lease_seconds))
            )
            if claim is not None and beat.rowcount != 1:
                raise ClaimLost(f"training job {job_id} is no longer held by {claim}")
            return insert_id(
                session, TrainingEventRow, job_id=job_id, created_at=now(), step=_optional_int(event.step),
                total=_optional_int(event.total), unit=event.unit, batch=_optional_int(event.batch),
                loss=_finite(event.loss), dev_map=_finite(event.dev_map),
                detail=jsonable(dict(event.detail)) if event.detail else None,
            )

    def finish_job(self, job_id: int, new: NewVersion, *, claim: str | None = None, actor: Actor | None = None) -> int:
        """Register the job's model as its next version, ``new`` (promoted for the job's dataset
        only if ``new.promote``), and mark the job succeeded, in ONE transaction; returns the
        ``model_versions`` id. The version is registered, and promoted, as the job's creator, who
        needs the right to train (and to promote) now: a role taken away since the job was queued
        counts (``authorize_creator``; ``AccessDenied``, nothing registered); the audit trail credits
        them, naming the ``actor`` running the job, who needs the right to train.

        ``InputError`` (and nothing registered) when the job is no longer running (with ``claim``:
        under that attempt), e.g. a reader declared it dead or gave it back to the queue.
        """

        def finish(session: Session) -> int:
            runner = authorize(session, actor, Permission.TRAIN, team=self.team)
            job = session.get(TrainingJobRow, job_id)
            if job is None:
                raise InputError(f"training job {job_id} does not exist")
            who = self._job_actor(session, job, runner, promote=new.promote)
            # The claim first: a job that lost it registers nothing (its file is left as it was).
            result = session.execute(
                update(TrainingJobRow)
                .where(*_holding(job_id, claim))
                .values(status="succeeded", phase="done", finished_at=now(), claim=None, lease_until=None)
            )
            if result.rowcount != 1:
                raise InputError(f"training job {job_id} is no longer running; its model is not registered")
            promoted_for = job.dataset if new.promote else None
            version_id = insert_model_version(session, job.model, new, promoted_for)
            session.execute(
                update(TrainingJobRow).where(TrainingJobRow.id == job_id).values(model_version_id=version_id)
            )
            ran = {"job": job_id, "run_by": runner.name}
            record(session, who, "register", job.model, {"version_id": version_id, "promoted_for": promoted_for,
                                                         "dataset": job.dataset, **ran})
            if promoted_for is not None:
                record(session, who, "promote", job.model, {"version_id": version_id, "scope": promoted_for, **ran})
            return version_id

        return self.retrying(finish, REGISTER_ATTEMPTS)

    def job_creator(self, job_id: int) -> Actor | None:
        """Who queued the job, allowed still to do what it asks (train; promote, if it promotes):
        a job checks it before it trains, so a demoted creator's job fails at once rather than after
        the training (``finish_job`` checks again, in its transaction). ``AccessDenied`` otherwise;
        None for a job queued before the store kept its creator."""
        with self.session_scope() as session:
            job = session.get(TrainingJobRow, job_id)
            if job is None:
                raise InputError(f"training job {job_id} does not exist")
            if job.created_by_kind is None:
                return None
            return self._job_actor(session, job, None, promote=bool((job.params or {}).get("promote")))

    def _job_actor(self, session: Session, job: TrainingJobRow, runner: Actor | None, *, promote: bool) -> Actor | None:
        """Whom the job acts as: its creator, authorised now (``authorize_creator``); a job queued
        before the store kept creators acts as its ``runner``, authorised as before."""
        if job.created_by_kind is None:
            return None if runner is None else authorize_training(session, runner, promote=promote, team=self.team)
        creator = Actor(job.created_by or "", Role.ANNOTATOR if job.created_by_kind == USER_KIND else Role.ADMIN,
                        job.created_by_kind, job.created_by_user_id)
        return authorize_creator(session, creator, f"training job {job.id}", promote=promote, team=self.team)

    def fail_job(self, job_id: int, error: str, claim: str | None = None, *, actor: Actor | None = None) -> bool:
        """Mark a queued or running job failed with ``error`` (with ``claim``: only while that
        attempt holds it); returns whether it did."""
        active = (TrainingJobRow.id == job_id, TrainingJobRow.status.in_(ACTIVE_STATUSES))
        with self.session_scope() as session:
            authorize(session, actor, Permission.TRAIN, team=self.team)
            result = session.execute(
                update(TrainingJobRow)
                .where(*(active if claim is None else _holding(job_id, claim)))
                .values(status="failed", finished_at=now(), error=error, claim=None, lease_until=None)
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
        return row_dict(row)

    def jobs(self, model: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The newest jobs first (of ``model`` if given); dead processes are marked failed first.

        Each dict: id, model, dataset, params, status (queued/running/succeeded/failed), phase,
        pid, host, created_at, started_at, heartbeat_at, finished_at, error, model_version_id,
        runner (process/worker), claim, lease_until, attempts.
        """
        query = select(TrainingJobRow).order_by(TrainingJobRow.id.desc()).limit(limit)
        if model is not None:
            query = query.where(TrainingJobRow.model == model)
        with self.session_scope() as session:
            rows = list(session.scalars(query))
        if any([self._found_dead(row) for row in rows]):
            with self.session_scope() as session:
                rows = list(session.scalars(query))
        return [row_dict(row) for row in rows]

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
        """Mark an active job whose process is gone failed (a worker job: give it back to the
        queue); returns whether the process was gone (the row read is stale then, even if the job
        reported its result just before dying). A queued worker job waits for a worker, however long.
        The store itself (``SYSTEM``) writes that verdict: any reader may notice a dead process."""
        if row.status not in ACTIVE_STATUSES:
            return False
        if row.runner == "worker":
            reason = _worker_lost(row) if row.status == "running" else None
            return reason is not None and self.give_back(row.id, row.claim, reason, actor=SYSTEM)
        reason = None
        if row.pid is not None and row.host == socket.gethostname() and not process_alive(row.pid):
            reason = f"the training process (pid {row.pid}) ended without reporting a result (killed or crashed)"
        else:
            last_sign = row.heartbeat_at or row.created_at
            if now() - last_sign > timedelta(seconds=HEARTBEAT_TIMEOUT_SECONDS):
                reason = f"no heartbeat from the training process since {last_sign:%Y-%m-%d %H:%M:%S} UTC"
        if reason is None:
            return False
        self.fail_job(row.id, reason, actor=SYSTEM)
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


def _claim_values(pid: int | None, host: str | None, lease_seconds: float) -> dict[str, Any]:
    """What claiming a queued job writes: running, under a new claim, one more attempt."""
    at = now()
    return {
        "status": "running",
        "claim": new_claim(),
        "lease_until": at + timedelta(seconds=lease_seconds),
        "attempts": TrainingJobRow.attempts + 1,
        "pid": pid or os.getpid(),
        "host": host or socket.gethostname(),
        "started_at": at,
        "heartbeat_at": at,
        "phase": "starting",
    }


def _beat_values(lease_seconds: float) -> dict[str, Any]:
    at = now()
    return {"heartbeat_at": at, "lease_until": at + timedelta(seconds=lease_seconds)}


def _holding(job_id: int, claim: str | None) -> tuple[Any, ...]:
    """The job is running (under attempt ``claim``, when given)."""
    running = (TrainingJobRow.id == job_id, TrainingJobRow.status == "running")
    return running if claim is None else (*running, TrainingJobRow.claim == claim)


def _worker_lost(row: TrainingJobRow) -> str | None:
    """Why the worker running ``row`` counts as gone, or ``None`` while it holds its lease."""
    worker = f"worker {row.host}:{row.pid}"
    if row.host == socket.gethostname() and row.pid is not None and not process_alive(row.pid):
        return f"{worker} ended during attempt {row.attempts}"
    if row.lease_until is not None and row.lease_until < now():
        return f"the lease of {worker} ran out at {row.lease_until:%Y-%m-%d %H:%M:%S} UTC during attempt {row.attempts}"
    return None


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _optional_int(value: int | None) -> int | None:
    return None if value is None else int(value)
