"""The front doors own their rules: the Train page and the CLI cannot promote a version the DEV
comparison found significantly worse (or could not compare) without a confirmation, nor roll back
to another version than the one offered; a role or an audit action that does not exist is refused
before the store is asked. One SQLite store, no model is scored: cheap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from db.audit import record
from db.base import NewVersion
from db.store import Store
from qa_core.access import LOCAL
from qa_core.data.demo import load_demo
from qa_core.services import models, users
from qa_core.services.retraining import VersionCheck
from qa_core.services.store_setup import open_store
from qa_core.types import InputError
from tests.conftest import model_file
from tests.pages import LANDING, open_page


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'doors.sqlite'}")
    store.datasets.import_dataset(load_demo())
    for _ in range(3):  # versions 1, 2, 3 trained on the demo; 1 promoted
        store.models.register_model("smcnn", NewVersion("smcnn", model_file("v.pt"), {"dataset": "demo"}, {}))
    store.models.promote("smcnn", 1, "demo")
    yield store
    store.close()


def _check(p_value: float) -> VersionCheck:
    return VersionCheck(version=2, promoted=1, questions=10, map_version=0.5, map_promoted=0.6, p_value=p_value,
                        worse=pd.DataFrame())


def test_a_promotion_needs_the_dev_comparison_or_a_confirmation(registry: Store) -> None:
    with pytest.raises(InputError, match="significantly worse on DEV: confirm"):
        models.promote(registry, "smcnn", 2, "demo", actor=None, check=_check(0.001))
    with pytest.raises(InputError, match="not compared with the promoted one on DEV"):
        models.promote(registry, "smcnn", 2, "demo", actor=None, compared=False)
    assert registry.models.promoted_model("smcnn", "demo")["version"] == 1  # nothing was promoted
    models.promote(registry, "smcnn", 2, "demo", actor=None, check=_check(0.4))  # worse, not significantly
    assert registry.models.promoted_model("smcnn", "demo")["version"] == 2
    models.promote(registry, "smcnn", 3, "demo", actor=None, check=_check(0.001), confirmed=True)
    assert registry.models.promoted_model("smcnn", "demo")["version"] == 3
    with pytest.raises(InputError, match="already the one promoted"):
        models.promote(registry, "smcnn", 3, "demo", actor=None)


def test_a_roll_back_puts_back_the_version_offered_or_nothing(registry: Store) -> None:
    models.promote(registry, "smcnn", 2, "demo", actor=None)
    offered = registry.models.rollback_target("smcnn", "demo")["version"]
    assert offered == 1
    registry.models.promote("smcnn", 3, "demo")  # another session, meanwhile: a roll back would now give 2
    with pytest.raises(InputError, match="changed meanwhile"):
        models.rollback(registry, "smcnn", "demo", offered, actor=None)
    assert registry.models.promoted_model("smcnn", "demo")["version"] == 3
    assert models.rollback(registry, "smcnn", "demo", 2, actor=None)["version"] == 2


def test_unknown_roles_and_audit_actions_are_refused_by_name(registry: Store) -> None:
    with pytest.raises(InputError, match="unknown role 'boss'"):
        users.grant_role(registry, "anyone@example.org", "boss", actor=None)
    with pytest.raises(InputError, match="unknown audit action"):
        users.audit_events(registry, ["promote", "promot"])
    assert [event["action"] for event in users.audit_events(registry, ["promote"])] == ["promote"]


def test_every_action_the_store_records_can_be_asked_for_and_a_service_password_is_never_shown(
        registry: Store, tmp_path: Path) -> None:
    """The trail's actions are one list the store checks as it writes: the systems' and kept
    questions' actions were written but could not be chosen on the Audit page or asked for by
    ``audit --action``. A service added before its URL's password was refused shows it cut."""
    registry.systems.add_system("old", "service", url="http://reader:s3cret-Pw@127.0.0.1:9/score?key=k3y")
    registry.systems.remove_system("old")
    [added] = users.audit_events(registry, ["add_system"])
    assert added["detail"]["url"] == "http://…@127.0.0.1:9/score?…"
    assert [event["action"] for event in users.audit_events(registry, ["remove_system"])] == ["remove_system"]
    shown = users.audit_csv(users.audit_table(registry)).decode() + str(users.audit_events(registry))
    assert "s3cret" not in shown and "k3y" not in shown and "external system added" in shown
    with registry.session_scope() as session, pytest.raises(ValueError, match="not in db.audit.ACTIONS"):
        record(session, LOCAL, "added_system")


def test_a_page_given_a_store_it_cannot_reach_says_why_in_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages open the store as the CLI does (``store_setup.open_store``): the driver's message,
    its hint and SQLAlchemy's link were shown, now one sentence with the password masked."""
    monkeypatch.setenv("RERANK_LAB_DB", "postgresql+psycopg://bob:s3cr3t@127.0.0.1:1/db?sslpassword=k3y")  # nothing listens on port 1
    [error] = [element.value for element in open_page(LANDING).error]
    assert error.lower().startswith("cannot open the store at postgresql") and "bob:\\*\\*\\*@" in error, error
    assert "\n" not in error and "s3cr3t" not in error and "k3y" not in error and "sqlalche.me" not in error
