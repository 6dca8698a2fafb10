"""``python -m qa_core worker``: serve the store's queue of training jobs.

With ``RERANK_LAB_JOB_RUNNER=worker`` the app (the Train page, ``jobs.start_training_job``) leaves
each training job queued in the store instead of starting a process for it; any number of workers,
on any machines that reach the store (a PostgreSQL URL for more than one machine) and share the
data folder's ``models/`` (where checkpoints are written), claim the oldest queued job, one at a
time, and run it as the job process would (``jobs.run_claimed``). The page polls the store and
shows the same progress, curve and outcome whichever runs the job.

What the store guarantees (``db/jobs.py``): two workers never hold the same job (one claiming
statement, ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, the write lock on SQLite), and every write of
an attempt is conditional on still holding it. A worker that stops, however (SIGKILL, a crash, a
lost machine: its lease runs out; SIGTERM or Ctrl-C: it gives the job back at once), leaves its
job claimable again with the promoted model untouched, since a version is registered only in
the job's last transaction.
"""

from __future__ import annotations

import json
import logging
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from db.jobs import LEASE_SECONDS, ClaimLost
from qa_core.services.jobs import HEARTBEAT_SECONDS, run_claimed
from qa_core.types import InputError, NotTrainedError

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.access import Actor

logger = logging.getLogger(__name__)

POLL_SECONDS = 2.0
Record = dict[str, object]


def _stop_on_sigterm() -> None:
    """SIGTERM ends the worker as Ctrl-C does: its job goes back to the queue first."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def serve(
    store: Store,
    *,
    lease_seconds: float = LEASE_SECONDS,
    poll_seconds: float = POLL_SECONDS,
    until_idle: bool = False,
    max_jobs: int | None = None,
    report: Callable[[Record], None] | None = None,
    actor: Actor | None = None,
) -> list[Record]:
    """Claim and run queued worker jobs until stopped (SIGTERM, Ctrl-C), ``max_jobs`` are done, or,
    with ``until_idle``, no worker job is queued or running (another worker's running job may
    still come back to the queue); returns one ``{"job", "status", ...}`` record per job.
    A job that fails is marked failed and the worker goes on; ``report`` (default: a JSON line on
    stdout) gets each record as the job ends. ``actor``: who runs the worker (the command line's
    operator), which claims the jobs and writes their progress; each job's version is registered as
    the user who queued it, with the role they hold then (``JobStore.finish_job``)."""
    if lease_seconds < 2 * HEARTBEAT_SECONDS:
        raise InputError(f"the lease must last at least two heartbeats ({2 * HEARTBEAT_SECONDS:g} s), got {lease_seconds:g}")
    report = report or (lambda record: print(json.dumps(record), flush=True))
    _stop_on_sigterm()
    served: list[Record] = []
    while max_jobs is None or len(served) < max_jobs:
        job = store.jobs.claim_job(lease_seconds, actor=actor)
        if job is None:
            if until_idle and store.jobs.active_worker_jobs() == 0:
                break
            time.sleep(poll_seconds)
            continue
        record: Record = {"job": job["id"], "model": job["model"], "dataset": job["dataset"],
                                     "attempt": job["attempts"]}
        try:
            record.update(status="succeeded", model_version_id=run_claimed(store, job, lease_seconds, actor=actor))
        except ClaimLost:
            record.update(status="dropped", reason="cancelled, or given back after the lease ran out")
        except (InputError, NotTrainedError) as error:
            record.update(status="failed", error=str(error))
        except Exception as error:  # marked failed by run_claimed; the traceback goes to this worker's log
            logger.exception("training job %s failed", job["id"])
            record.update(status="failed", error=f"{type(error).__name__}: {error}")
        served.append(record)
        report(record)
    return served
