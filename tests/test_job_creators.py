"""A training job acts as the user who queued it (issue 45, item 4), on SQLite and PostgreSQL: the
worker or process that runs it claims it and writes its progress, but the version is registered and
promoted as its creator, with the role they hold when it finishes; a creator demoted meanwhile gets
nothing registered, and is refused before the training when demoted before it starts. The audit
trail credits the creator, naming who ran it."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from db.base import NewVersion
from db.models import TrainingEventRow
from db.store import Store
from qa_core.access import SYSTEM, AccessDenied, operator
from qa_core.services import jobs
from tests.conftest import model_file
from tests.teams import sign_in, small

WORKER = operator("worker-host")


@pytest.fixture
def team(database_url: str):
    """A team-mode store with the small dataset; ada (admin, first) made rita an admin too."""
    store = Store(database_url, team=True)
    store.datasets.import_dataset(small(), actor=SYSTEM)
    ada, rita = sign_in(store, "ada"), sign_in(store, "rita")
    store.users.grant_role("rita@example.org", "admin", actor=ada)
    yield store, ada, store.users.user_actor(rita)
    store.close()


def claimed_job(store: Store, creator, *, promote: bool) -> dict:
    store.jobs.create_job("smcnn", "d", {"seed": 1, "promote": promote}, runner="worker", actor=creator)
    return store.jobs.claim_job(actor=WORKER)


def finish(store: Store, job: dict, *, promote: bool) -> int:
    new = NewVersion("smcnn", model_file("rita.pt"), {"dataset": "d"}, {}, promote=promote)
    return store.jobs.finish_job(job["id"], new, claim=job["claim"], actor=WORKER)


@pytest.mark.parametrize("promote", [True, False])
def test_a_job_whose_creator_was_demoted_registers_nothing(team, promote: bool) -> None:
    store, ada, rita = team
    job = claimed_job(store, rita, promote=promote)
    store.users.grant_role("rita@example.org", "reviewer", actor=ada)  # while the worker trains
    with pytest.raises(AccessDenied) as refused:
        finish(store, job, promote=promote)
    assert str(refused.value) == (f"rita@example.org (reviewer), who queued training job {job['id']}, may no longer "
                                  "train models; nothing was saved")
    assert store.models.model_versions() == [] and store.models.promoted_model("smcnn", "d") is None
    assert [e["action"] for e in store.users.audit_events(["register", "promote"])] == []


def test_a_job_registers_and_promotes_as_its_creator_and_the_trail_names_the_runner(team) -> None:
    store, ada, rita = team
    job = claimed_job(store, rita, promote=True)
    version_id = finish(store, job, promote=True)
    assert store.models.promoted_model("smcnn", "d")["id"] == version_id
    trail = {e["action"]: (e["actor"], e["detail"]["run_by"]) for e in store.users.audit_events(["register", "promote"])}
    assert trail == {"register": ("rita@example.org", WORKER.name), "promote": ("rita@example.org", WORKER.name)}


def test_a_job_whose_creator_was_demoted_before_it_ran_fails_before_training(team) -> None:
    store, ada, rita = team
    job = claimed_job(store, rita, promote=True)
    store.users.grant_role("rita@example.org", "annotator", actor=ada)
    with pytest.raises(AccessDenied, match="may no longer train models"):
        jobs.run_claimed(store, job, actor=WORKER)
    ended = store.jobs.job(job["id"])
    assert ended["status"] == "failed" and ended["model_version_id"] is None
    assert ended["error"] == f"rita@example.org (annotator), who queued training job {job['id']}, may no longer train models; nothing was saved"
    with store.session_scope() as session:  # refused before the first training event
        assert session.scalar(select(func.count()).select_from(TrainingEventRow)) == 0


def test_a_merged_creator_acts_as_the_user_they_were_merged_into(team) -> None:
    store, ada, rita = team
    job = claimed_job(store, rita, promote=True)
    store.users.grant_role("rita@example.org", "annotator", actor=ada)
    store.users.merge_users(ada.user_id, rita.user_id, actor=ada)  # one person: ada, an admin
    finish(store, job, promote=True)
    assert {e["actor"] for e in store.users.audit_events(["register", "promote"])} == {"ada@example.org"}
