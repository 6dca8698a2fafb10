"""Every write of the store checks who writes, inside its own transaction.

The first test reads the store's source: each ``with self.session_scope()`` block that writes
(an INSERT, UPDATE or DELETE, or a helper that does) must call ``db.audit.authorize`` in the same
block, and each public method of a part of ``Store`` (one per context) that reaches such a block must take ``actor``. A new
write method that skips the check fails it, whatever its name. The others show the cases that got
through before on a team store: a job's promotion, claims in another's name, runs saved by nobody.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import textwrap
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event

import db.labeling
from db.base import NewVersion, StoreBase
from db.labeling import QueueScope
from db.store import Store
from qa_core.access import SYSTEM, AccessDenied, operator
from qa_core.types import InputError
from tests.conftest import model_file
from tests.teams import sign_in, small

WRITES = {"insert", "update", "delete", "add", "insert_model_version", "insert_promotion", "write_dataset",
          "_import_dataset", "insert_id", "end_open_claims"}
AUTHORIZES = {"authorize", "authorize_training"}
# Authentication itself: a sign-in creates its user (and is audited), a sign-out ends sign-ins; both
# check the token or the user, not a role.
NOT_ROLE_CHECKED = {"sign_in", "sign_out"}
# Reads that find a job's process dead and say so: the store's own verdict, written as ``SYSTEM``.
STORE_VERDICTS = {"job", "jobs"}


def _called(node: ast.AST) -> set[str]:
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def _self_calls(node: ast.AST) -> set[str]:
    """The store's own methods that ``node`` calls (``self.name(...)``)."""
    return {
        call.func.attr for call in ast.walk(node)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
    }


def _methods() -> dict[str, ast.FunctionDef]:
    """Every method of the store's parts (one per context, composed by ``db.store.Store``), by name."""
    methods: dict[str, ast.FunctionDef] = {}
    parts = StoreBase.__subclasses__()
    assert len(parts) >= 10, parts  # importing db.store imported every part
    for part in parts:
        tree = ast.parse(textwrap.dedent(inspect.getsource(part)))
        for node in tree.body[0].body:
            if isinstance(node, ast.FunctionDef):
                assert node.name not in methods or node.name.startswith("_"), f"two parts define {node.name}"
                methods[node.name] = node
    return methods


def _write_blocks(method: ast.FunctionDef) -> list[ast.With | ast.FunctionDef]:
    """The method's transactions that write: its ``with self.session_scope()`` blocks, and the
    functions it hands to ``self.retrying`` (each run in a transaction of its own)."""
    retried = {
        call.args[0].id for call in ast.walk(method)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "retrying"
        and call.args and isinstance(call.args[0], ast.Name)
    }
    return [
        node for node in ast.walk(method)
        if (
            isinstance(node, ast.With) and any("session_scope" in ast.unparse(item.context_expr) for item in node.items)
            or isinstance(node, ast.FunctionDef) and node.name in retried
        )
        and _called(node) & WRITES
    ]


def test_every_write_of_the_store_authorizes_its_actor_in_its_transaction() -> None:
    methods = _methods()
    unchecked = [
        f"{name} (line {block.lineno} of its class)"
        for name, method in methods.items() if name not in NOT_ROLE_CHECKED
        for block in _write_blocks(method) if not _called(block) & AUTHORIZES
    ]
    assert not unchecked, f"writes without db.audit.authorize in their transaction: {unchecked}"

    def writes(name: str, seen: frozenset[str] = frozenset()) -> bool:
        method = methods[name]
        return bool(_write_blocks(method)) or any(
            callee in methods and callee not in seen and writes(callee, seen | {name}) for callee in _self_calls(method)
        )

    public_writers = {name for name in methods if not name.startswith("_") and writes(name)}
    public_writers -= NOT_ROLE_CHECKED | STORE_VERDICTS
    assert {"finish_job", "end_claim", "release_claims", "claim_next", "save_run", "add_label"} <= public_writers
    no_actor = sorted(
        name for name in public_writers
        if "actor" not in [arg.arg for arg in methods[name].args.kwonlyargs]
    )
    assert not no_actor, f"public write methods of the store's parts that take no actor: {no_actor}"


@pytest.fixture
def team(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'team.sqlite'}", team=True)
    store.datasets.import_dataset(small(), actor=SYSTEM)
    ada, anna, mallory = sign_in(store, "ada"), sign_in(store, "anna"), sign_in(store, "mallory")
    yield store, ada, anna, mallory
    store.close()


def test_a_job_promotes_only_for_an_actor_that_may_and_the_promotion_is_audited(team) -> None:
    store, ada, anna, _ = team
    job_id = store.jobs.create_job("smcnn", "d", {"promote": True}, runner="worker", actor=ada)
    runner = operator("trainer")
    job = store.jobs.claim_job(actor=runner)
    new = NewVersion("smcnn", model_file("m.pt"), {"dataset": "d"}, {}, promote=True)
    with pytest.raises(AccessDenied, match="sign in first"):
        store.jobs.finish_job(job_id, new, claim=job["claim"])
    with pytest.raises(AccessDenied, match="may not train models"):
        store.jobs.finish_job(job_id, new, claim=job["claim"], actor=anna)
    assert store.models.model_versions("smcnn") == []
    version_id = store.jobs.finish_job(job_id, new, claim=job["claim"], actor=runner)
    assert store.models.promoted_model("smcnn", "d")["id"] == version_id
    events = {e["action"]: e for e in store.users.audit_events(["register", "promote"])}
    assert events["promote"]["actor"] == "ada@example.org"  # who queued it (issue 45), naming who ran it
    assert events["promote"]["detail"] == {"version_id": version_id, "scope": "d", "job": job_id, "run_by": "cli:trainer"}


def test_a_checkpoint_outside_the_data_folders_models_folder_is_never_registered(team, models_dir, tmp_path) -> None:
    """Issue 33: a job finishing with a checkpoint elsewhere on the machine registered it and
    promoted it, so the pages would load that file. Refused by path, by ``..`` and by a symlink in
    the models folder, through a job and directly; nothing registered, promoted or stamped."""
    store, ada, _, _ = team
    in_use = store.models.register_model("smcnn", NewVersion("smcnn", model_file("v1.pt"), {"dataset": "d"}, {}, promote=True), actor=ada)
    job_id = store.jobs.create_job("smcnn", "d", {"promote": True}, runner="worker", actor=ada)
    runner = operator("trainer")
    job = store.jobs.claim_job(actor=runner)
    outside = tmp_path / "elsewhere.pt"
    outside.write_bytes(b"a file the store must not register")
    (models_dir / "link.pt").symlink_to(outside)
    for path in (outside, models_dir / ".." / ".." / "elsewhere.pt", models_dir / "link.pt"):
        refused = f"refused to register checkpoint {path}: it is outside the data folder's models folder"
        with pytest.raises(InputError, match=re.escape(refused)):
            store.jobs.finish_job(job_id, NewVersion("smcnn", path, {"dataset": "d"}, {}, promote=True), claim=job["claim"], actor=runner)
        with pytest.raises(InputError, match=re.escape(refused)):
            store.models.register_model("smcnn", NewVersion("smcnn", path, {"dataset": "d"}, {}, promote=True), actor=ada)
    assert [v["id"] for v in store.models.model_versions("smcnn")] == [in_use]
    assert store.models.promoted_model("smcnn", "d")["id"] == in_use
    assert store.jobs.job(job_id)["status"] == "running"
    assert [e["detail"]["version_id"] for e in store.users.audit_events(["register", "promote"])] == [in_use]
    assert outside.read_bytes() == b"a file the store must not register"


def test_claims_are_made_and_ended_only_in_the_signed_in_annotators_name(team) -> None:
    store, _, anna, mallory = team
    order = [record.candidate_id for record in store.datasets.candidate_rows("d")]
    with pytest.raises(AccessDenied, match="sign in first"):
        store.queue.claim_next(QueueScope("d", order, "anna@example.org"))
    with pytest.raises(AccessDenied, match="cannot record a judgement as annotator 'anna@example.org'"):
        store.queue.claim_next(QueueScope("d", order, "anna@example.org"), actor=mallory)
    claim = store.queue.claim_next(QueueScope("d", order, "anna@example.org", holder="tab-1"), actor=anna)
    with pytest.raises(AccessDenied, match="cannot record a judgement as annotator 'anna@example.org'"):
        store.queue.end_claim(claim.claim_id, "skipped", actor=mallory)
    assert store.queue.release_claims("d", "tab-1", actor=mallory) == 0
    assert [c.claim_id for c in store.queue.open_claims("d")] == [claim.claim_id]
    with pytest.raises(AccessDenied, match="sign in first"):
        store.queue.release_claims("d", "tab-1")
    assert store.queue.release_claims("d", "tab-1", actor=anna) == 1


def test_a_run_is_saved_only_by_an_actor_that_may_train_and_audited(team) -> None:
    store, ada, anna, _ = team
    run = {"q1": {"a": 1.0, "b": 0.0}}
    with pytest.raises(AccessDenied, match="sign in first"):
        store.runs.save_run("d", "train", run, {})
    with pytest.raises(AccessDenied, match="may not train models"):
        store.runs.save_run("d", "train", run, {}, actor=anna)
    assert store.runs.runs("d") == []
    run_id = store.runs.save_run("d", "train", run, {}, tag="bm25", actor=ada)
    assert store.users.audit_events(["save_run"])[0]["detail"]["run_id"] == run_id


def _sign_in(store: Store, issuer: str, subject: str, email: str):
    at = datetime.now(UTC).replace(microsecond=0)
    return store.users.sign_in(subject, email, None, issued_at=at, expires_at=at + timedelta(hours=1), issuer=issuer)


def test_users_are_keyed_by_issuer_and_subject_and_a_known_email_is_another_person(tmp_path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'ids.sqlite'}", team=True)
    store.datasets.import_dataset(small(), actor=SYSTEM)
    ada = _sign_in(store, "https://team.example", "ada", "ada@example.org")
    mallory = _sign_in(store, "https://other.example", "mallory", "ada@example.org")
    same_sub = _sign_in(store, "https://other.example", "ada", "ada@example.org")
    assert ada.name == "ada@example.org" and ada.role == "admin"
    assert len({ada.user_id, mallory.user_id, same_sub.user_id}) == 3
    assert mallory.role == "annotator" and mallory.name == f"ada@example.org #{mallory.user_id}"
    candidate = store.datasets.find_candidate_id("d", "q1", "a")
    store.labels.add_label(candidate, None, 3, actor=ada)
    with pytest.raises(AccessDenied, match="cannot record a judgement as annotator 'ada@example.org'"):
        store.labels.add_label(candidate, "ada@example.org", 0, actor=mallory)
    store.labels.add_label(candidate, None, 0, actor=mallory)
    assert store.labels.undo_last(None, "d", actor=mallory)["value"] == 0
    assert store.labels.current_labels("d") == {candidate: {"ada@example.org": 3}}
    with pytest.raises(AccessDenied, match="may not change roles"):
        store.users.merge_users(ada.user_id, mallory.user_id, actor=mallory)
    store.users.merge_users(ada.user_id, mallory.user_id, actor=ada)
    again = _sign_in(store, "https://other.example", "mallory", "ada@example.org")
    assert (again.user_id, again.name, again.role) == (ada.user_id, "ada@example.org", "admin")
    assert store.users.audit_events(["merge_users"])[0]["actor"] == "ada@example.org"
    store.close()


def test_merged_users_resolve_to_the_last_one_and_an_admin_stays(tmp_path) -> None:
    """Merges chain (carol into bob, then bob into ada): every merged identity signs in as ada, a
    merged identity's live sign-in writes nothing under its old name, and neither a merge nor a
    role change leaves the store without an admin (a merged admin's row does not count)."""
    store = Store(f"sqlite:///{tmp_path / 'merge.sqlite'}", team=True)
    store.datasets.import_dataset(small(), actor=SYSTEM)
    ada, bob, carol, dan = (_sign_in(store, "https://team.example", name, f"{name}@example.org")
                            for name in ("ada", "bob", "carol", "dan"))
    with pytest.raises(InputError, match="ada@example.org is the last admin"):
        store.users.merge_users(bob.user_id, ada.user_id, actor=ada)
    store.users.merge_users(bob.user_id, carol.user_id, actor=ada)
    store.users.merge_users(ada.user_id, bob.user_id, actor=ada)
    assert {user["subject"]: user["merged_into"] for user in store.users.users()}["carol"] == ada.user_id
    again = _sign_in(store, "https://team.example", "carol", "carol@example.org")
    assert (again.user_id, again.name, again.role) == (ada.user_id, "ada@example.org", "admin")
    candidate = store.datasets.find_candidate_id("d", "q1", "a")
    with pytest.raises(AccessDenied, match="bob@example.org was merged into ada@example.org; sign in again"):
        store.labels.add_label(candidate, None, 1, actor=bob)
    assert store.labels.current_labels("d") == {}
    store.users.grant_role("dan@example.org", "admin", actor=ada)
    store.users.merge_users(ada.user_id, dan.user_id, actor=ada)
    with pytest.raises(InputError, match="ada@example.org is the last admin"):
        store.users.grant_role("ada@example.org", "annotator", actor=ada)
    store.close()


def test_a_claim_is_timed_after_its_transaction_took_the_write_lock(tmp_path, monkeypatch) -> None:
    """Claim times come from inside the write: taken before it (as they were), a claim that waited
    for the lock started before the claim it replaced had ended (overlapping intervals)."""
    store = Store(f"sqlite:///{tmp_path / 'claims.sqlite'}")
    store.datasets.import_dataset(small(), actor=SYSTEM)
    order = [record.candidate_id for record in store.datasets.candidate_rows("d")]
    events: list[tuple[str, object]] = []
    ticks = itertools.count()

    def clock() -> datetime:
        at = datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=next(ticks))
        events.append(("now", at))
        return at

    monkeypatch.setattr(db.labeling, "now", clock)
    event.listen(store.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: events.append(("sql", statement.split()[0].upper())))
    claim = store.queue.claim_next(QueueScope("d", order, "ann"))
    first_write = next(i for i, (kind, what) in enumerate(events) if kind == "sql" and what in ("UPDATE", "INSERT"))
    assert events.index(("now", claim.claimed_at)) > first_write
    store.close()
