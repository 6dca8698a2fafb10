"""Training jobs served by ``python -m qa_core worker`` on SQLite and PostgreSQL: claims are
exclusive when processes race for them, a claim is a lease whose loss stops every later write of
its attempt, and with two real worker processes, the one SIGKILLed mid-job leaves the job
claimable again (the other, which waited meanwhile, takes it) and the promoted model untouched;
a job cancelled on a worker is dropped by it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from db.base import NewVersion, now
from db.jobs import MAX_ATTEMPTS, WAITING_FOR_WORKER, ClaimLost
from db.models import TrainingJobRow
from db.store import Store
from qa_core.cli import main
from qa_core.data.demo import load_demo
from qa_core.services import jobs
from qa_core.training.events import TrainingEvent
from qa_core.types import InputError
from tests import ROOT
from tests.conftest import model_file
from tests.waiting import WAIT_S, wait_until

CLAIMERS, WORKER_JOBS = 4, 40

# One process racing for claims: says it is ready (store imported and connected), waits for the
# start signal, claims until the queue is empty and writes the ids it got; then stays alive until
# told to stop. A claimer that exited while others still claim would be a lost worker, whose jobs
# rightly go back to the queue (on a busy machine one claimer can finish before another starts).
CLAIMER = """
import json, os, sys, time
from pathlib import Path
from db.store import Store
store, folder, me = Store(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
store.jobs.active_worker_jobs()
(folder / f"ready-{me}").touch()
while not (folder / "go").exists():
    time.sleep(0.005)
got = []
while (job := store.jobs.claim_job()) is not None:
    got.append(job["id"])
(folder / f".got-{me}").write_text(json.dumps(got))
(folder / f".got-{me}").rename(folder / f"got-{me}.json")  # whole, for the test to read
while not (folder / "stop").exists():
    time.sleep(0.02)
"""


def test_claims_are_exclusive_when_processes_race(store: Store, tmp_path: Path) -> None:
    process_jobs = [store.jobs.create_job("smcnn", "demo", {}) for _ in range(3)]  # the launcher's: never claimed
    worker_jobs = [store.jobs.create_job("smcnn", "demo", {}, runner="worker") for _ in range(WORKER_JOBS)]
    claimers = [subprocess.Popen([sys.executable, "-c", CLAIMER, store.url, str(tmp_path), str(n)], cwd=ROOT,
                                 stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
                for n in range(CLAIMERS)]
    try:
        wait_until(lambda: all((tmp_path / f"ready-{n}").exists() for n in range(CLAIMERS)), "the claimers to connect")
        (tmp_path / "go").touch()
        results = [tmp_path / f"got-{n}.json" for n in range(CLAIMERS)]
        wait_until(lambda: all(path.exists() for path in results), "every claimer to find the queue empty")
        claimed = [json.loads(path.read_text()) for path in results]
    finally:
        (tmp_path / "stop").touch()
        for claimer in claimers:
            _, err = claimer.communicate(timeout=WAIT_S)
            assert claimer.returncode == 0, err
    every = [job_id for got in claimed for job_id in got]
    assert sorted(every) == worker_jobs, "every worker job claimed, none twice"
    for got in claimed:
        assert got == sorted(got), "each claimer got the oldest queued job each time"
    with store.session_scope() as session:  # as written (a reader would see the claimers gone and requeue)
        rows = {row.id: row for row in session.scalars(select(TrainingJobRow))}
    assert {rows[i].status for i in process_jobs} == {"queued"}
    assert {(rows[i].status, rows[i].attempts) for i in worker_jobs} == {("running", 1)}
    assert len({rows[i].claim for i in worker_jobs}) == WORKER_JOBS


def test_a_lost_claim_writes_nothing_more_and_the_job_goes_back(store: Store) -> None:
    store.models.register_model("smcnn", NewVersion("smcnn", model_file("1.pt"), {"dataset": "demo"}, {}, promote=True))
    job_id = store.jobs.create_job("smcnn", "demo", {"promote": True}, runner="worker")
    old = store.jobs.job(job_id)
    assert (old["status"], old["phase"], old["attempts"]) == ("queued", WAITING_FOR_WORKER, 0)
    with store.session_scope() as session:  # queued for hours: waiting for a worker is no failure
        session.execute(update(TrainingJobRow).values(created_at=now() - timedelta(hours=5),
                                                      heartbeat_at=now() - timedelta(hours=5)))
    assert store.jobs.job(job_id)["status"] == "queued"

    first = store.jobs.claim_job(pid=1, host="another-host")  # a worker on another machine
    assert (first["id"], first["attempts"], first["runner"]) == (job_id, 1, "worker")
    assert store.jobs.claim_job() is None
    assert store.jobs.job_heartbeat(job_id, "training", claim=first["claim"])
    assert not store.jobs.job_heartbeat(job_id, claim="someone else's claim")
    store.jobs.add_job_event(job_id, TrainingEvent(1, 3, dev_map=0.5), claim=first["claim"])

    with store.session_scope() as session:  # its heartbeats stopped: the lease runs out
        session.execute(update(TrainingJobRow).values(lease_until=now() - timedelta(seconds=1)))
    back = store.jobs.job(job_id)
    assert back["status"] == "queued" and back["claim"] is None and store.jobs.job_events(job_id) == []
    assert back["phase"].startswith("queued again: the lease of worker another-host:1 ran out")

    second = store.jobs.claim_job()
    assert (second["id"], second["attempts"]) == (job_id, 2) and second["claim"] != first["claim"]
    with pytest.raises(ClaimLost):
        store.jobs.add_job_event(job_id, TrainingEvent(2, 3), claim=first["claim"])
    with pytest.raises(InputError, match="no longer running"):
        store.jobs.finish_job(job_id, NewVersion("smcnn", model_file("2.pt"), {}, {}, promote=True), claim=first["claim"])
    assert not store.jobs.fail_job(job_id, "late failure of the lost attempt", claim=first["claim"])
    assert [(v["version"], v["promoted_for"]) for v in store.models.model_versions("smcnn")] == [(1, ["demo"])]
    assert store.jobs.job(job_id)["status"] == "running" and store.jobs.job_events(job_id) == []

    store.jobs.finish_job(job_id, NewVersion("smcnn", model_file("2.pt"), {}, {}), claim=second["claim"])
    assert store.jobs.job(job_id)["status"] == "succeeded"


def test_a_job_whose_workers_keep_getting_lost_fails(store: Store) -> None:
    job_id = store.jobs.create_job("smcnn", "demo", {}, runner="worker")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        claim = store.jobs.claim_job(pid=_dead_pid())  # this host: a worker whose process is gone
        assert claim["attempts"] == attempt
        assert store.jobs.release_lost_jobs() == [job_id]
    job = store.jobs.job(job_id)
    assert job["status"] == "failed" and f"given up after {MAX_ATTEMPTS} attempts" in job["error"]
    assert store.jobs.claim_job() is None


def test_worker_options_and_an_empty_queue(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", store.url, "worker", "--lease", "3"]) == 2
    assert "at least two heartbeats" in capsys.readouterr().err
    store.jobs.create_job("smcnn", "demo", {})  # the launcher's own job: no worker waits for it
    assert main(["--db", store.url, "worker", "--until-idle"]) == 0
    assert capsys.readouterr().out == ""


# ------------------------------------------------------------------------------ real workers


def start_worker(url: str, log: Path) -> subprocess.Popen:
    """``python -m qa_core worker`` on the session's data folder, whose parse cache holds the demo."""
    env = {**os.environ, "RERANK_LAB_DB": url, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "qa_core", "worker", "--until-idle", "--poll", "0.2"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)


def test_a_killed_worker_leaves_its_job_to_the_other_and_the_promoted_model_alone(store: Store, tmp_path: Path) -> None:
    store.datasets.import_dataset(load_demo())
    promoted_bytes = os.urandom(64)  # the promoted version's checkpoint: nothing may touch it
    promoted_file = Path(model_file("killed-worker-v1.pt"))
    promoted_file.write_bytes(promoted_bytes)
    store.models.register_model("smcnn", NewVersion("smcnn", promoted_file, {"dataset": "demo"}, {"dev_map": 0.5}, promote=True))
    promoted = store.models.promoted_model("smcnn", "demo")

    def queue(config: dict) -> int:
        return jobs.start_training_job(store, "smcnn", "demo", gold=True, model_config=config, runner="worker")

    # A long job (a dev check every batch, up to 30 epochs): it is running when killed.
    long_job = queue({"max_epochs": 30, "patience": 30, "eval_every": 1})
    workers = [start_worker(store.url, tmp_path / f"worker{n}.log") for n in range(2)]
    try:
        holder = wait_until(lambda: (j := store.jobs.job(long_job))["phase"] == "training" and j["pid"],
                            "a worker to claim the job and start training")
        victim = next(w for w in workers if w.pid == holder)
        survivor = next(w for w in workers if w is not victim)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)

        # The other worker waited meanwhile (never running the job while the first held it); now
        # it finds the killed worker gone, puts the job back in the queue and claims it as attempt
        # 2. The killed attempt registered and promoted nothing.
        retried = wait_until(lambda: (j := store.jobs.job(long_job))["attempts"] == 2 and j["status"] == "running" and j,
                             "the survivor to claim the killed worker's job")
        assert retried["pid"] == survivor.pid
        assert [v["id"] for v in store.models.model_versions("smcnn")] == [promoted["id"]]
        assert store.models.promoted_model("smcnn", "demo")["id"] == promoted["id"]
        assert jobs.cancel_job(store, long_job)  # the survivor drops it at its next event or heartbeat
        out, _ = survivor.communicate(timeout=WAIT_S)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert survivor.returncode == 0, (tmp_path / f"worker{workers.index(survivor)}.log").read_text()
    served = [json.loads(line) for line in out.splitlines()]
    assert [(r["job"], r["attempt"], r["status"]) for r in served] == [(long_job, 2, "dropped")]
    assert (store.jobs.job(long_job)["status"], store.jobs.job(long_job)["error"]) == ("failed", "cancelled")
    assert [v["id"] for v in store.models.model_versions("smcnn")] == [promoted["id"]]
    assert store.models.promoted_model("smcnn", "demo")["id"] == promoted["id"]
    assert promoted_file.read_bytes() == promoted_bytes


def _dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid
