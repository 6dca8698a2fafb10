"""Who may manage a dataset's annotation (issue 21, item 1): in team mode only an admin edits the
guidelines and the share of double-annotated pairs, checked by the store inside the write (a
refusal says why and writes nothing) and audited; local mode lets anyone. Through the library on
SQLite and PostgreSQL, and through the Label page in team mode (Streamlit AppTest)."""

from __future__ import annotations

import pytest

from db.store import Store
from qa_core.access import SYSTEM, AccessDenied
from tests.pages import LABEL, LANDING
from tests.teams import claims, shown, sign_in, small, table_rows, team_page

WRITTEN = ("guidelines", "annotation_settings", "audit_events")
GUIDELINES = "A year alone *partly* answers a when-question."


def test_only_an_admin_edits_guidelines_and_settings_in_team_mode(database_url: str) -> None:
    store = Store(database_url, team=True)
    try:
        store.datasets.import_dataset(small(), actor=SYSTEM)
        ada, rita, anna = sign_in(store, "ada"), sign_in(store, "rita"), sign_in(store, "anna")
        store.users.grant_role("rita@example.org", "reviewer", actor=ada)
        rita = rita.with_role("reviewer")
        before = table_rows(database_url, WRITTEN)
        for who, role in ((anna, "annotator"), (rita, "reviewer")):
            refusal = f"{who.name} \\({role}\\) may not edit a dataset's guidelines or labelling settings"
            with pytest.raises(AccessDenied, match=refusal + ".*nothing was saved"):
                store.annotation.save_guidelines("d", GUIDELINES, actor=who)
            with pytest.raises(AccessDenied, match=refusal):
                store.annotation.set_annotation_settings("d", 1.0, 2, actor=who)
        with pytest.raises(AccessDenied, match="sign in"):
            store.annotation.save_guidelines("d", GUIDELINES, "ada@example.org")  # no actor: team mode refuses
        with pytest.raises(AccessDenied, match="cannot record .* as author 'bob'"):
            store.annotation.save_guidelines("d", GUIDELINES, "bob", actor=ada)  # an admin writes as themselves
        assert table_rows(database_url, WRITTEN) == before

        saved = store.annotation.save_guidelines("d", GUIDELINES, actor=ada)
        store.annotation.set_annotation_settings("d", 0.5, 3, actor=ada)
        assert (saved.version, saved.author) == (1, "ada@example.org")
        assert store.annotation.annotation_settings("d")[:3] == (0.5, 3, "ada@example.org")
        trail = [(e["actor"], e["action"], e["target"], e["detail"]) for e in
                 reversed(store.users.audit_events(["guidelines", "annotation_settings"]))]
        assert trail == [
            ("ada@example.org", "guidelines", "d", {"version": 1, "author": "ada@example.org", "characters": len(GUIDELINES)}),
            ("ada@example.org", "annotation_settings", "d", {"overlap_share": 0.5, "overlap": 3, "changed_by": "ada@example.org"}),
        ]
    finally:
        store.close()

    local = Store(database_url)  # the same database in local mode: anyone, under a typed name
    try:
        assert local.annotation.save_guidelines("d", GUIDELINES + " Dates too.", "bob").author == "bob"
        local.annotation.set_annotation_settings("d", 0.2, 2, "bob")
        assert [e["actor"] for e in local.users.audit_events(["guidelines", "annotation_settings"], limit=2)] == ["local", "local"]
    finally:
        local.close()


def test_the_label_page_offers_the_guideline_editor_to_admins_only(store_url: str) -> None:
    team_page(LANDING, claims("ada"))  # the first sign-in is the admin
    team_page(LANDING, claims("anna"))
    anna = team_page(LABEL, claims("anna"))
    anna.radio(key="label_view").set_value("Guidelines").run()
    assert not anna.exception, anna.exception
    assert not anna.text_area and "Save as a new version" not in [b.label for b in anna.button]
    assert "Only an admin edits the guidelines" in shown(anna)
    assert not anna.checkbox and any("Only an admin changes it." in c.value for c in anna.caption)  # calibration too

    ada = team_page(LABEL, claims("ada"))
    ada.radio(key="label_view").set_value("Guidelines").run()
    ada.text_area(key="guidelines_text:demo").input(GUIDELINES)
    ada.button[[b.label for b in ada.button].index("Save as a new version")].click().run()
    assert not ada.exception, ada.exception
    ada.checkbox(key="calibration_on:demo").check()
    ada.number_input(key="calibration_size:demo").set_value(1)
    ada.button[[b.label for b in ada.button].index("Save calibration")].click().run()
    assert not ada.exception, ada.exception
    store = Store(store_url)
    try:
        assert (store.annotation.guidelines("demo").version, store.annotation.guidelines("demo").author) == (1, "ada@example.org")
    finally:
        store.close()

    anna.radio(key="label_view").set_value("Label").run()  # beside the pair, and read-only in the view
    assert any(m.value == GUIDELINES for m in anna.markdown)
    assert anna.get("progress")[0].proto.text.startswith("Calibration: gold pair 1 of 1")  # anna is new: gold first
    anna.button(key="grade-3").click().run()
    assert any(m.label == "Exact agreement" for m in anna.metric)
    store = Store(store_url)
    try:
        assert [(j.annotator, j.value) for j in store.calibration.calibration_judgements("demo")] == [("anna@example.org", 3)]
        assert store.calibration.calibration_settings("demo").changed_by == "ada@example.org"
    finally:
        store.close()
    anna.radio(key="label_view").set_value("Guidelines").run()
    assert any(m.value == GUIDELINES for m in anna.markdown) and not anna.text_area
