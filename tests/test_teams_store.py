"""Teams in the store, on SQLite and PostgreSQL: users keyed by the provider's subject, the first
sign-in becomes admin, roles checked by every guarded write inside its transaction (a refused
write leaves every table as it was), labels carrying their user, the audit trail, sign-out and
expiry ending a sign-in, and local mode unchanged."""

from __future__ import annotations

import getpass
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from db.base import NewVersion
from db.store import Store
from qa_core.access import LOCAL, SYSTEM, AccessDenied, Actor, Role, operator
from qa_core.cli import main
from qa_core.services import users as audit
from qa_core.services.labeling import LabelingSession
from qa_core.types import InputError
from tests.conftest import model_file
from tests.teams import sign_in, small, table_rows

TABLES = ("datasets", "candidates", "labels", "label_retractions", "adjudications", "model_versions",
          "model_promotions", "training_jobs", "users", "audit_events", "store_info")


@pytest.fixture
def team(database_url: str):
    """A team-mode store with the small dataset (imported by the app itself), a registered version
    promoted twice and a conflict; ada (admin, first), rita (reviewer), anna (annotator)."""
    store = Store(database_url, team=True)
    store.datasets.import_dataset(small(), actor=SYSTEM)
    ada = sign_in(store, "ada")
    rita, anna = sign_in(store, "rita"), sign_in(store, "anna")
    store.users.grant_role("rita@example.org", "reviewer", actor=ada)
    for _ in range(2):
        store.models.register_model("smcnn", NewVersion("smcnn", model_file("m.pt"), {"dataset": "d"}, {}, promote=True), actor=ada)
    yield store, {"ada": ada, "rita": rita.with_role(Role.REVIEWER), "anna": anna}
    store.close()


def test_the_first_sign_in_is_admin_and_later_ones_annotators(team) -> None:
    store, _ = team
    assert [(u["email"], u["role"]) for u in store.users.users()] == [
        ("ada@example.org", "admin"), ("rita@example.org", "reviewer"), ("anna@example.org", "annotator")
    ]
    again = sign_in(store, "anna")  # a later sign-in keeps the role and refreshes the user
    assert again.role is Role.ANNOTATOR and again.user_id == store.users.users()[2]["id"]


def test_an_annotator_cannot_do_what_reviewers_and_admins_do_and_nothing_is_written(team, database_url) -> None:
    store, people = team
    anna = people["anna"]
    candidate = store.datasets.find_candidate_id("d", "q1", "a")
    before = table_rows(database_url, TABLES)
    refusals = {
        "promote models": lambda: store.models.promote("smcnn", 1, "d", actor=anna),
        "roll back models": lambda: store.models.rollback("smcnn", "d", actor=anna),
        "adjudicate conflicts": lambda: store.labels.adjudicate(candidate, 2, None, actor=anna),
        "import or delete data": lambda: store.datasets.import_dataset(small(), replace=True, actor=anna),
        "train models": lambda: store.jobs.create_job("smcnn", "d", {"seed": 1}, actor=anna),
        "change roles": lambda: store.users.grant_role("anna@example.org", "admin", actor=anna),
    }
    for permission, attempt in refusals.items():
        with pytest.raises(AccessDenied, match=f"anna@example.org \\(annotator\\) may not {permission}"):
            attempt()
    with pytest.raises(AccessDenied, match="may not import or delete data"):
        store.datasets.delete_dataset("d", actor=anna)
    with pytest.raises(AccessDenied, match="may not train models"):
        store.models.register_model("smcnn", NewVersion("smcnn", model_file("x.pt"), {"dataset": "d"}, {}), actor=anna)
    assert table_rows(database_url, TABLES) == before
    assert store.models.promoted_model("smcnn", "d")["version"] == 2


def test_a_reviewer_adjudicates_but_does_not_promote_and_an_admin_does_both(team) -> None:
    store, people = team
    candidate = store.datasets.find_candidate_id("d", "q1", "a")
    store.labels.adjudicate(candidate, 3, None, note="clear", actor=people["rita"])
    assert store.labels.adjudications("d")[candidate]["adjudicator"] == "rita@example.org"
    with pytest.raises(AccessDenied, match="reviewer\\) may not promote"):
        store.models.promote("smcnn", 1, "d", actor=people["rita"])
    store.models.rollback("smcnn", "d", actor=people["ada"])
    assert store.models.promoted_model("smcnn", "d")["version"] == 1


def test_a_label_in_team_mode_carries_its_user_and_no_other_name(team, database_url) -> None:
    store, people = team
    anna = people["anna"]
    candidate = store.datasets.find_candidate_id("d", "q1", "a")
    label_id = store.labels.add_label(candidate, None, 2, actor=anna)
    store.labels.add_label(candidate, "anna@example.org", 3, actor=anna)
    before = table_rows(database_url, TABLES)
    with pytest.raises(AccessDenied, match="cannot record a judgement as annotator 'rita@example.org'"):
        store.labels.add_label(candidate, "rita@example.org", 0, actor=anna)
    assert table_rows(database_url, TABLES) == before
    with store.engine.connect() as connection:
        written = connection.execute(text("SELECT annotator, user_id FROM labels WHERE id = :i"), {"i": label_id}).one()
    assert tuple(written) == ("anna@example.org", anna.user_id)
    assert [h["annotator"] for h in store.labels.label_history(candidate)] == ["anna@example.org"] * 2


def test_the_queue_labels_as_the_signed_in_user_and_refuses_a_claim_in_another_name(team) -> None:
    store, people = team
    anna, rita = people["anna"], people["rita"]
    session = LabelingSession.build(store, "d", anna.name, actor=anna)
    item = session.current()
    session.label(item, 4)
    assert store.labels.current_labels("d")[item.candidate_id] == {"anna@example.org": 4}
    forged = LabelingSession.build(store, "d", anna.name, holder="rita-tab", actor=rita)  # rita's page asks as anna
    with pytest.raises(AccessDenied, match="rita@example.org cannot record a judgement as annotator 'anna@example.org'"):
        forged.label(forged.current(), 0)
    assert session.undo().candidate_id == item.candidate_id  # anna takes back her own label
    assert store.labels.current_labels("d") == {}


def test_writes_without_a_signed_in_user_are_refused_in_team_mode_and_local_mode_is_unchanged(
    team, database_url
) -> None:
    store, _ = team
    candidate = store.datasets.find_candidate_id("d", "q1", "a")
    for actor in (None, LOCAL):
        with pytest.raises(AccessDenied, match="sign in"):
            store.labels.add_label(candidate, "anyone", 1, actor=actor)
    local = Store(database_url)  # the same database opened in local mode: as before teams
    try:
        local.labels.add_label(candidate, "alice", 1)
        local.models.promote("smcnn", 1, "d")
        assert local.labels.current_labels("d")[candidate] == {"alice": 1}
        assert local.users.audit_events(["promote"])[0]["actor"] == "local"
    finally:
        local.close()


def test_a_role_change_or_a_sign_out_counts_at_once_for_a_session_already_open(team, database_url) -> None:
    store, people = team
    ada, anna = people["ada"], people["anna"]
    store.users.grant_role("anna@example.org", "admin", actor=ada)
    store.models.promote("smcnn", 1, "d", actor=anna)  # anna's open session has the new role at once
    store.users.grant_role("ada@example.org", "annotator", actor=anna)
    with pytest.raises(AccessDenied, match="ada@example.org \\(annotator\\) may not promote"):
        store.models.promote("smcnn", 2, "d", actor=ada)  # ada's actor still says admin: the store knows better
    store.users.sign_out(anna)
    before = table_rows(database_url, TABLES)
    with pytest.raises(AccessDenied, match="anna@example.org signed out at .* which ended this session; sign in again"):
        store.models.promote("smcnn", 2, "d", actor=anna)
    with pytest.raises(AccessDenied, match="signed out"):
        store.users.user_actor(anna)
    with pytest.raises(AccessDenied, match="signed out"):  # the same token (a copied cookie) cannot sign in again
        store.users.sign_in(anna.subject, anna.name, "Anna", issued_at=anna.signed_in_at, expires_at=anna.expires_at)
    assert table_rows(database_url, TABLES) == before
    fresh = sign_in(store, "anna", at=datetime.now(UTC) + timedelta(seconds=2))  # a new sign-in works again
    store.models.promote("smcnn", 2, "d", actor=fresh)


def test_an_expired_token_is_refused_at_sign_in_and_at_every_write(team, database_url) -> None:
    store, people = team
    hour_ago = datetime.now(UTC) - timedelta(hours=2)
    before = table_rows(database_url, TABLES)
    with pytest.raises(AccessDenied, match="the sign-in of anna@example.org expired at .*; sign in again"):
        sign_in(store, "anna", at=hour_ago)
    expired = Actor(people["ada"].name, Role.ADMIN, user_id=people["ada"].user_id, subject=people["ada"].subject,
                    signed_in_at=hour_ago, expires_at=hour_ago + timedelta(hours=1))
    with pytest.raises(AccessDenied, match="expired"):
        store.models.promote("smcnn", 1, "d", actor=expired)
    assert table_rows(database_url, TABLES) == before


def test_the_last_admin_cannot_step_down_and_unknown_users_or_roles_are_named(team) -> None:
    store, people = team
    with pytest.raises(InputError, match="ada@example.org is the last admin"):
        store.users.grant_role("ada@example.org", "reviewer", actor=people["ada"])
    with pytest.raises(InputError, match="no user 'zoe@example.org' has signed in yet"):
        store.users.grant_role("zoe@example.org", "reviewer", actor=people["ada"])
    with pytest.raises(InputError, match="unknown role 'boss'; roles: annotator, reviewer, admin"):
        store.users.grant_role("anna@example.org", "boss", actor=people["ada"])
    assert store.users.grant_role("sub-anna", "reviewer", actor=people["ada"])["role"] == "reviewer"  # by subject too


def test_the_audit_trail_says_who_did_what_and_when_and_exports_as_csv(team, tmp_path: Path) -> None:
    store, people = team
    candidate = store.datasets.find_candidate_id("d", "q1", "a")
    store.labels.adjudicate(candidate, 1, None, actor=people["rita"])
    store.models.rollback("smcnn", "d", actor=people["ada"])
    store.jobs.create_job("smcnn", "d", {"seed": 3}, actor=people["ada"])
    trail = [(e["actor"], e["action"], e["target"]) for e in reversed(store.users.audit_events())]
    assert trail == [
        ("system", "import", "d"),
        ("system", "user_created", "ada@example.org"),
        ("system", "user_created", "rita@example.org"),
        ("system", "user_created", "anna@example.org"),
        ("ada@example.org", "role_change", "rita@example.org"),
        ("ada@example.org", "register", "smcnn"),
        ("ada@example.org", "register", "smcnn"),
        ("rita@example.org", "adjudicate", "d q1/a"),
        ("ada@example.org", "rollback", "smcnn"),
        ("ada@example.org", "train", "smcnn"),
    ]
    assert store.users.audit_events(["role_change"])[0]["detail"] == {"from": "annotator", "to": "reviewer",
                                                               "user_id": people["rita"].user_id}
    assert all(e["at"].tzinfo is not None for e in store.users.audit_events())
    csv = audit.audit_csv(audit.audit_table(store, ["rollback", "adjudicate"])).decode()
    lines = csv.splitlines()
    assert lines[0] == "at,actor,action,what,target,detail"
    assert lines[1].split(",")[1:4] == ["ada@example.org", "rollback", "model rolled back"]
    assert lines[2].split(",")[1:4] == ["rita@example.org", "adjudicate", "conflict adjudicated"]
    assert '""scope"": ""d""' in lines[1] and len(lines) == 3


def test_two_first_sign_ins_at_once_make_one_admin(database_url: str) -> None:
    stores = [Store(database_url, team=True) for _ in range(2)]
    barrier, actors, errors = threading.Barrier(2), {}, []

    def first(i: int) -> None:
        barrier.wait()
        try:
            actors[i] = sign_in(stores[i], f"user{i}")
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=first, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for store in stores:
        store.close()
    assert not errors
    assert sorted(actor.role.value for actor in actors.values()) == ["admin", "annotator"]


def test_the_cli_grants_roles_lists_users_and_exports_the_audit_trail(team, database_url, tmp_path, capsys) -> None:
    store, people = team
    assert main(["--db", database_url, "users", "grant", "anna@example.org", "reviewer"]) == 0
    assert '"role": "reviewer"' in capsys.readouterr().out
    assert store.users.user_actor(people["anna"]).role is Role.REVIEWER
    assert main(["--db", database_url, "users", "grant", "nobody@example.org", "admin"]) == 2
    assert "error: no user 'nobody@example.org' has signed in yet" in capsys.readouterr().err
    assert main(["--db", database_url, "users", "list"]) == 0
    assert capsys.readouterr().out.count('"subject"') == 3
    out = tmp_path / "audit.csv"
    assert main(["--db", database_url, "audit", "--action", "role_change", "--out", str(out)]) == 0
    written = out.read_text().splitlines()
    assert len(written) == 3  # the header, ada's change of rita's role and the CLI's of anna's
    assert written[1].split(",")[1:3] == [operator(getpass.getuser()).name, "role_change"]


def test_migration_0006_keeps_every_label_and_its_downgrade_drops_only_the_team_tables(database_url: str) -> None:
    from sqlalchemy import inspect

    from db.session import downgrade, upgrade

    store = Store(database_url, team=True)
    try:
        store.datasets.import_dataset(small(), actor=SYSTEM)
        candidate = store.datasets.find_candidate_id("d", "q1", "a")
        local = Store(database_url)
        local.labels.add_label(candidate, "alice", 2)
        local.close()
        anna = sign_in(store, "anna")
        store.labels.add_label(candidate, None, 3, actor=anna)
        downgrade(store.engine, "0005")
        with store.engine.connect() as connection:
            assert not {"users", "audit_events"} & set(inspect(connection).get_table_names())
            assert connection.execute(text("SELECT annotator, value FROM labels ORDER BY id")).all() == [
                ("alice", 2), ("anna@example.org", 3)
            ]
        upgrade(store.engine, "head")
        with store.engine.connect() as connection:
            assert connection.execute(text("SELECT annotator, user_id FROM labels ORDER BY id")).all() == [
                ("alice", None), ("anna@example.org", None)  # local mode's labels, and those from before 0006
            ]
        assert store.users.users() == [] and store.users.audit_events() == []
    finally:
        store.close()
