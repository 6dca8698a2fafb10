"""The pages in team mode under Streamlit AppTest (an ``[auth]`` secrets section and the identity
token's claims as ``st.user``): the sign-in screen, what each role sees, and that the writes the
pages make carry the signed-in user (role change on the Audit page, adjudication on Label's review
view, promotion on Train); and local mode without any configuration, as before."""

from __future__ import annotations

from db.base import NewVersion
from db.store import Store
from qa_core.access import SYSTEM, Role
from tests.conftest import model_file
from tests.pages import LABEL, LANDING, TRAIN, open_page
from tests.teams import AUDIT, claims, shown, team_page


def test_signed_out_visitors_see_only_the_sign_in_button(store_url) -> None:
    for path in (LANDING, LABEL, TRAIN, AUDIT):
        page = team_page(path, {"is_logged_in": False})
        assert [b.label for b in page.button] == ["Sign in"], path
        assert "Sign in to use Rerank Lab" in shown(page)
        assert not page.dataframe and not page.radio and not page.selectbox


def test_each_role_sees_what_it_may_do_and_the_landing_page_lists_only_those_pages(store_url) -> None:
    ada = team_page(LANDING, claims("ada"))
    assert "Signed in as **Ada** (ada@\u2060example.org) · admin" in [m.value for m in ada.sidebar.markdown]
    links = [link.label for link in ada.get("page_link")]  # the name is the link; what it does wraps beside it
    assert links == ["Ask", "Compare", "Label", "Train", "Errors", "Audit", "Systems"]
    assert any(text.value.startswith("bring a ranker built elsewhere") for text in ada.markdown)
    anna = team_page(LANDING, claims("anna"))
    assert [link.label for link in anna.get("page_link")] == ["Ask", "Compare", "Label", "Errors", "Systems"]
    store = Store(store_url)
    team_page(LANDING, claims("rita"))
    store.users.grant_role("rita@example.org", Role.REVIEWER)  # local actor: the command line's way
    store.close()
    label_views = {who: team_page(LABEL, claims(who)).radio(key="label_view").options for who in ("anna", "rita", "ada")}
    assert label_views == {
        "anna": ["Label", "Guidelines"],
        "rita": ["Label", "Agreement", "Review conflicts", "Guidelines"],
        "ada": ["Label", "Agreement", "Review conflicts", "Guidelines"],
    }
    for who, role in (("anna", "annotator"), ("rita", "reviewer")):
        assert f"{who}@example.org ({role}) may not train models here" in shown(team_page(TRAIN, claims(who)))
    assert "may not" not in shown(team_page(TRAIN, claims("ada")))


def test_the_pages_write_as_the_signed_in_user(store_url) -> None:
    team_page(LANDING, claims("ada"))
    team_page(LANDING, claims("rita"))
    audit_page = team_page(AUDIT, claims("ada"))
    audit_page.selectbox(key="audit_user").set_value("rita@example.org")
    audit_page.selectbox(key="audit_role").set_value(Role.REVIEWER)
    audit_page.button(key="audit_grant").click().run()
    assert not audit_page.exception, audit_page.exception
    assert "rita@example.org is now reviewer." in shown(audit_page)

    store = Store(store_url)
    try:
        candidate = store.datasets.find_candidate_id("demo", "demo-01", "demo-01-0")
        store.labels.add_label(candidate, "x", 1)  # a conflict, written in local mode by two typed names
        store.labels.add_label(candidate, "y", 3)
        for _ in range(2):
            store.models.register_model("smcnn", NewVersion("smcnn", model_file("m.pt"), {"dataset": "demo"}, {}, promote=True), actor=SYSTEM)
        review = team_page(LABEL, claims("rita"))
        review.radio(key="label_view").set_value("Review conflicts").run()
        review.button(key="settle-3").click().run()
        assert not review.exception, review.exception
        settled = store.labels.adjudications("demo")[candidate]
        assert (settled["adjudicator"], settled["value"]) == ("rita@example.org", 3)

        train = team_page(TRAIN, claims("ada"))
        train.selectbox(key="train_version_smcnn").set_value(1).run()
        # The registered files are not real checkpoints: no DEV comparison, so promoting is confirmed first.
        assert train.button(key="train_promote").disabled
        train.checkbox(key="train_confirm_smcnn_1").check().run()
        train.button(key="train_promote").click().run()
        assert not train.exception, train.exception
        assert store.models.promoted_model("smcnn", "demo")["version"] == 1
        trail = [(e["actor"], e["action"]) for e in store.users.audit_events(["role_change", "adjudicate", "promote"])]
        assert trail == [("ada@example.org", "promote"), ("rita@example.org", "adjudicate"),
                         ("ada@example.org", "role_change")]
    finally:
        store.close()


def test_local_mode_needs_no_configuration_and_works_as_before(store_url) -> None:
    label = open_page(LABEL)
    assert not label.sidebar.button  # no sign-in, no sign-out
    assert label.radio(key="label_view").options == ["Label", "Agreement", "Review conflicts", "Guidelines"]
    assert "Annotator" in [s.label for s in label.selectbox]  # names are typed or chosen, as before
    audit_page = open_page(AUDIT)
    assert "No one has signed in yet" in shown(audit_page)
    assert audit_page.dataframe[0].value["actor"].tolist() == ["system"]  # the demo import
    audit_page.multiselect(key="audit_actions").select("promote").run()  # matches nothing, though the import is there
    assert "Nothing matches the chosen actions (promote)" in shown(audit_page) and "Nothing recorded yet" not in shown(audit_page)
    assert not audit_page.dataframe  # no empty events table (and no users signed in)
