"""Issue 21 on the Label page through AppTest: agreement that says when it means nothing, the
overlap share set on the page, names that draw nothing refused, undo per browser session, and a
model-based order that labels while it scores. Real store (SQLite in tmp), real demo corpus."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from db.store import Store
from qa_core.services import model_loading, store_setup
from qa_core.services.labeling import LabelingSession
from qa_core.types import Dataset
from tests.pages import LABEL, TIMEOUT, claims, open_page
from tests.teams import shown, sign_in, team_page


def start(name: str):
    app = open_page(LABEL)
    app.text_input(key="new_annotator").input(name).run()
    assert not app.exception, app.exception
    return app


def shown_pair(app) -> str:
    return next(c.value for c in app.caption if " · " in c.value and "labelled" not in c.value)


def metrics(app) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


@pytest.mark.parametrize("name", ["\u200b", "\u200b\u200c\ufeff", "\u3164", " \u2060 ", "   "])
def test_invisible_annotator_names_are_refused(store_url, name):
    app = open_page(LABEL)
    app.text_input(key="new_annotator").input(name).run()
    assert not app.exception, app.exception
    assert any("invisible" in e.value or "empty" in e.value for e in app.error), [e.value for e in app.error]
    assert not [b for b in app.button if b.key == "grade-0"]  # nobody to label as


def test_a_name_hiding_a_zero_width_space_is_refused(store_url):
    app = open_page(LABEL)
    app.text_input(key="new_annotator").input("ali\u200bce").run()
    assert any("invisible character" in e.value for e in app.error)
    assert Store(store_url).labels.current_labels("demo") == {}


def test_agreement_over_one_shared_pair_says_not_enough_overlap(store_url):
    store = Store(store_url)
    store_setup.ensure_demo(store)
    (first, *_) = [r.candidate_id for r in store.datasets.candidate_rows("demo")]
    store.labels.add_label(first, "ann", 1)
    store.labels.add_label(first, "bob", 2)
    app = open_page(LABEL)
    app.radio(key="label_view").set_value("Agreement").run()
    assert not app.exception, app.exception
    assert metrics(app)["Krippendorff's α (ordinal)"] == "—"  # was "0.000" before; why, beside it:
    assert "not enough overlap (1 shared)" in [caption.value for caption in app.caption]
    (row,) = app.dataframe[0].value.to_dict("records")
    assert row["pairs both judged"] == 1 and row["note"] == "not enough overlap"
    assert row["weighted κ"] is None or row["weighted κ"] != row["weighted κ"]  # None / NaN: not shown
    store.close()


def test_agreement_with_enough_overlap_shows_coefficients_and_intervals(store_url):
    store = Store(store_url)
    store_setup.ensure_demo(store)
    ids = [r.candidate_id for r in store.datasets.candidate_rows("demo")][:12]
    grades = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (0, 1), (1, 1), (2, 3), (3, 3), (4, 3), (0, 0), (2, 2)]
    for candidate_id, (a, b) in zip(ids, grades):
        store.labels.add_label(candidate_id, "ann", a)
        store.labels.add_label(candidate_id, "bob", b)
    app = open_page(LABEL)
    app.radio(key="label_view").set_value("Agreement").run()
    assert not app.exception, app.exception
    alpha = float(metrics(app)["Krippendorff's α (ordinal)"])
    assert 0.8 < alpha < 1.0
    (row,) = app.dataframe[0].value.to_dict("records")
    assert row["pairs both judged"] == 12 and 0.8 < row["weighted κ"] < 1.0
    assert row["weighted κ low"] < row["weighted κ"] < row["weighted κ high"] <= 1.0
    assert not app.warning
    # The dashboard's tables: bias (both 0: each disagreement is split around the median), the
    # disagreement per question class, and no seconds (these labels were not given in the queue).
    bias = app.dataframe[1].value.set_index("annotator")
    assert bias.loc["ann", "bias"] == pytest.approx(-bias.loc["bob", "bias"])
    assert app.dataframe[2].value["shared pairs"].sum() == 12
    timing = app.dataframe[3].value  # each annotator listed, none timed
    assert timing["annotator"].tolist() == ["ann", "bob"] and timing["judgements"].tolist() == [0, 0]
    assert len(app.get("plotly_chart")) == 2
    store.close()


def test_the_annotator_count_agrees_with_the_tables_and_says_what_it_counts(store_url):
    """Issue 45: "Annotators 4" stood above tables listing 3 (one annotator shared no pair): every
    per-annotator table lists everyone counted, and the count says who the agreement leaves out."""
    store = Store(store_url)
    store_setup.ensure_demo(store)
    ids = [r.candidate_id for r in store.datasets.candidate_rows("demo")][:4]
    for name in ("ann", "bob", "cleo"):
        store.labels.add_label(ids[0], name, 2)
    store.labels.add_label(ids[1], "ann", 1)
    store.labels.add_label(ids[1], "bob", 3)
    store.labels.add_label(ids[3], "dora", 4)  # alone on her pair
    app = open_page(LABEL)
    app.radio(key="label_view").set_value("Agreement").run()
    assert not app.exception, app.exception
    assert metrics(app)["Annotators"] == "4"
    (line,) = [c.value for c in app.caption if c.value.startswith("everyone with a current label")]
    assert "dora shares no pair with another (no κ, no bias)" in line
    bias = next(d.value for d in app.dataframe if "bias" in d.value.columns)
    timing = next(d.value for d in app.dataframe if "p90 s" in d.value.columns)
    assert bias["annotator"].tolist() == timing["annotator"].tolist() == ["ann", "bob", "cleo", "dora"]
    assert bias.set_index("annotator").loc["dora", "shared pairs"] == 0
    store.close()


def test_share_of_double_annotated_pairs_is_set_on_the_page(store_url):
    app = start("alice")
    app.radio(key="label_view").set_value("Agreement").run()
    app.slider(key="overlap_share:demo").set_value(100)
    app.button[[b.label for b in app.button].index("Save share")].click().run()
    assert not app.exception, app.exception
    store = Store(store_url)
    settings = store.annotation.annotation_settings("demo")
    assert (settings.overlap_share, settings.changed_by) == (1.0, "alice")
    # Every pair now wants two annotators: alice's judgement leaves her pair open for bob, so
    # bob's share of the queue is every pair (with 20%, alice's pair would likely be complete).
    app.radio(key="label_view").set_value("Label").run()
    app.button(key="grade-2").click().run()
    total = len(store.datasets.candidate_rows("demo", split="train"))  # the queue's default split
    bob = start("bob")
    assert bob.get("progress")[0].proto.text.startswith(f"0 of {total} labelled by you")
    store.close()


def test_undo_takes_back_only_this_sessions_labels(store_url):
    tab_a, tab_b = start("alice"), start("alice")
    tab_a.button(key="grade-3").click().run()
    tab_b.button(key="grade-1").click().run()
    tab_a.button(key="undo").click().run()
    store = Store(store_url)
    assert sorted(g["alice"] for g in store.labels.current_labels("demo").values()) == [1]  # tab b's stays
    tab_a.button(key="undo").click().run()  # nothing of tab a's left: tab b's label is not touched
    assert any("Nothing of yours to undo" in c.value for c in tab_a.caption)
    assert sorted(g["alice"] for g in store.labels.current_labels("demo").values()) == [1]
    store.close()


def test_every_action_lists_its_key(store_url):
    app = start("alice")
    keys = next(c.value for c in app.caption if c.value.startswith("Keys:"))
    for key in ("0–4", "S skip", "U undo", "O queue order", "Esc"):
        assert key in keys
    shortcuts = {b.key: b.proto.shortcut for b in app.button if b.key}
    assert {key: shortcuts[key] for key in ("grade-0", "grade-4", "skip", "undo")} == {
        "grade-0": "0", "grade-4": "4", "skip": "s", "undo": "u"
    }


def test_guidelines_written_on_the_page_show_beside_the_pair_and_version_the_labels(store_url):
    app = start("alice")
    assert any("No guidelines for this dataset yet" in c.value for c in app.caption)
    assert any("**2 · partly answers**" in m.value for m in app.markdown)  # the grade scale, always
    app.radio(key="label_view").set_value("Guidelines").run()
    app.text_area(key="guidelines_text:demo").input("A year alone <b>partly</b> answers a *when* question.")
    app.button[[b.label for b in app.button].index("Save as a new version")].click().run()
    assert not app.exception, app.exception
    assert any("version 1 is in force" in s.value for s in app.success)
    app.radio(key="label_view").set_value("Label").run()
    assert [e.label for e in app.expander] == ["Guidelines (version 1)"]
    assert any(m.value == "A year alone <b>partly</b> answers a *when* question." for m in app.markdown)
    app.button(key="grade-2").click().run()
    store = Store(store_url)
    (version,) = store.annotation.label_guideline_versions("demo").values()
    assert version == 1
    store.close()


def test_the_settings_editors_show_the_chosen_datasets_values_and_save_nothing_into_another(store_url):
    store = Store(store_url)
    store_setup.ensure_demo(store)
    store.datasets.import_dataset(Dataset("other", store.datasets.load_dataset("demo").questions[:5]))
    store.annotation.save_guidelines("demo", "DEMO RULES", "admin")
    store.annotation.save_guidelines("other", "OTHER RULES", "admin")
    store.calibration.set_calibration("demo", True, 7, "admin")
    store.annotation.set_annotation_settings("demo", 0.5, 2, "admin")
    app = start("alice")
    app.radio(key="label_view").set_value("Guidelines").run()
    assert app.text_area(key="guidelines_text:demo").value == "DEMO RULES"
    app.selectbox(key="label_dataset").set_value("other").run()
    assert app.text_area(key="guidelines_text:other").value == "OTHER RULES"  # was DEMO RULES, kept by its key
    assert (app.checkbox(key="calibration_on:other").value, app.number_input(key="calibration_size:other").value) == (
        False, store.calibration.calibration_settings("other").pairs)
    for button in ("Save as a new version", "Save calibration"):
        app.button[[b.label for b in app.button].index(button)].click().run()
        assert not app.exception, app.exception
    assert [g.text for g in store.annotation.guideline_history("other")] == ["OTHER RULES"]
    assert not store.calibration.calibration_settings("other").enabled
    app.radio(key="label_view").set_value("Agreement").run()
    assert app.slider(key="overlap_share:other").value == 20  # the default, not demo's 50%
    app.button[[b.label for b in app.button].index("Save share")].click().run()
    assert store.annotation.annotation_settings("other").overlap_share == 0.2
    store.close()


# ------------------------------------------------------------------ pairwise and top-k (item 2)


def shown_item(app) -> str:
    return next(c.value for c in app.caption if c.value.endswith((" · pairwise", " · topk")))


def test_pairwise_mode_judges_skips_and_undoes_with_history(store_url):
    app = start("alice")
    assert any("partly answers" in m.value for m in app.markdown), "the graded mode's scale"
    app.selectbox(key="label_mode").select("pairwise").run()
    assert not app.exception, app.exception
    assert not any("partly answers" in m.value for m in app.markdown), "pairwise judges no grade: no 0-4 scale"
    keys = next(c.value for c in app.caption if c.value.startswith("Keys:"))
    assert "1 left better · 2 right better · 3 tie (equally good) · 0 both bad" in keys and "U undo" in keys
    assert {b.key: b.proto.shortcut for b in app.button if b.key and b.key.startswith("pair-")} == {
        "pair-left": "1", "pair-right": "2", "pair-tie": "3", "pair-both_bad": "0"}
    first = shown_item(app)
    app.button(key="pair-right").click().run()
    assert any(c.value.startswith(f"Judged {first.split(' · ')[0]}: right is better") for c in app.caption)
    second = shown_item(app)
    app.button(key="skip").click().run()
    assert shown_item(app) != second
    app.button(key="pair-tie").click().run()
    app.button(key="undo").click().run()
    assert any("Took back your judgement" in c.value for c in app.caption)
    store = Store(store_url)
    judged = store.preferences.preference_judgements("demo", "alice", "pairwise")
    assert [j.outcome for j in judged] == ["right"] and judged[0].qid == first.split(" · ")[0]
    store.close()


def test_topk_mode_saves_the_picks_best_first_at_k(store_url):
    app = start("alice")
    app.selectbox(key="label_mode").select("topk").run()
    app.selectbox(key="topk_k").select(2).run()
    assert not app.exception, app.exception
    qid = shown_item(app).split(" · ")[0]
    app.button(key="pick-3").click().run()
    assert any("**[pick 1]**" in m.value for m in app.markdown) and app.button(key="pick-3").disabled
    app.button(key="clear_picks").click().run()
    assert not any("**[pick 1]**" in m.value for m in app.markdown)
    app.button(key="pick-2").click().run()
    app.button(key="pick-1").click().run()  # the second pick: saved
    assert any(c.value.startswith(f"Judged {qid}: picked 2, 1") for c in app.caption)
    app.button(key="pick-done").click().run()  # the next pool: none fits
    store = Store(store_url)
    first, second = store.preferences.preference_judgements("demo", "alice", "topk")
    assert first.qid == qid and first.picked == (first.shown[1], first.shown[0]) and second.picked == ()
    store.close()


# ------------------------------------------------------------------ model suggestions (item 4)


def test_model_suggestions_are_off_by_default_and_on_per_annotator(store_url):
    app = start("alice")
    assert app.toggle(key="suggest").value is False and not any("suggests:" in i.value for i in app.info)
    app.toggle(key="suggest").set_value(True).run()
    app.selectbox(key="suggest_model").select("overlap").run()
    assert not app.exception, app.exception
    (hint,) = [i.value for i in app.info if "suggests:" in i.value]
    assert hint.startswith("overlap suggests: score ") and " in this question's pool; weightiest words: " in hint
    app.selectbox(key="annotator_choice").select("New annotator…").run()
    app.text_input(key="new_annotator").input("bob").run()  # another annotator: off until bob turns it on
    assert app.toggle(key="suggest").value is False and not any("suggests:" in i.value for i in app.info)


def test_review_queues_a_models_disagreements_with_the_consensus(store_url):
    from qa_core import ordering
    from qa_core.services.labeling.suggestions import MODEL_RELEVANT

    app = start("rita")
    app.radio(key="label_view").set_value("Review conflicts").run()
    app.toggle(key="review_model_on").set_value(True).run()
    app.selectbox(key="review_model").select("overlap").run()
    caption = ""
    for _ in range(60):  # overlap scores the demo in the background; rerun until it is done
        app.run()
        caption = next((c.value for c in app.caption if "disagrees with the annotators' consensus" in c.value), "")
        if caption and not any(p.proto.text.startswith("Scoring with") for p in app.get("progress")):
            break
    assert caption.startswith("0 pairs"), caption  # no labels yet: no consensus to disagree with

    store = Store(store_url)
    question = next(q for q in store.datasets.load_dataset("demo").questions if q.qid == "demo-01")
    scores = model_loading.load_ranker(store, "overlap", "demo").score(question.text, question.candidates)
    first = question.candidates[ordering.order([c.doc_id for c in question.candidates], scores)[0]].doc_id
    store.labels.add_label(store.datasets.find_candidate_id("demo", "demo-01", first), "alice", 0)  # the annotators say no
    store.close()
    app.run()
    assert not app.exception, app.exception
    assert any(c.value.startswith("1 pairs where overlap") for c in app.caption)
    (table,) = [d.value for d in app.dataframe if "labels" in d.value.columns]
    assert table["labels"].tolist() == [f"alice: 0, model:overlap: {MODEL_RELEVANT}"]


def test_undo_after_the_sign_in_ended_says_so_and_takes_nothing_back(store_url):
    """A label written, then the user signed out elsewhere (their sign-ins end): the Label tab's
    undo takes nothing back and the page says why, where the undo raised a traceback before."""
    anna = team_page(LABEL, claims("anna"))
    anna.button(key="grade-3").click().run()
    store = Store(store_url)
    store.users.sign_out(sign_in(store, "anna"))
    anna.button(key="undo").click().run()
    assert not anna.exception, anna.exception
    assert "anna@example.org signed out at" in shown(anna)
    assert [g["anna@example.org"] for g in store.labels.current_labels("demo").values()] == [3]
    store.close()


def two_undo_presses(url: str, pairwise: bool) -> None:
    """Two Undo presses that reach the app before its next run draws the button again, in the graded
    queue or the pairwise view: Streamlit runs the button's callback for each, one after the other
    (an AppTest script: imports inside)."""
    import streamlit as st

    from db.preferences import PAIRWISE
    from db.store import Store
    from pages.label import preference_view, queue_view, shared
    from qa_core.services.labeling import LabelingSession
    from qa_core.services.labeling.preferences import PreferenceSession

    store = Store(url)
    if pairwise:
        session = PreferenceSession.build(store, "demo", "alice", PAIRWISE, "random", holder="tab", split="train")
        undo = preference_view.undo_preference
    else:
        session = LabelingSession.build(store, "demo", "alice", holder="tab", split="train")
        undo = queue_view.undo
    st.session_state[shared.UNDO_DRAWN] = True  # what the run that drew the Undo button leaves
    undo(session)
    undo(session)


def test_a_double_undo_press_takes_back_one_label(store_url):
    store = Store(store_url)
    store_setup.ensure_demo(store)
    tab = LabelingSession.build(store, "demo", "alice", holder="tab", split="train")
    for grade in (1, 2):
        tab.label(tab.current(), grade)
    app = AppTest.from_function(two_undo_presses, args=(store_url, False), default_timeout=TIMEOUT).run()
    assert not app.exception, app.exception
    assert sorted(g["alice"] for g in store.labels.current_labels("demo", "alice").values()) == [1]  # the 2 alone
    store.close()


def test_a_double_undo_press_takes_back_one_pairwise_judgement(store_url):
    from db.preferences import PAIRWISE
    from qa_core.services.labeling.preferences import PreferenceSession

    store = Store(store_url)
    store_setup.ensure_demo(store)
    tab = PreferenceSession.build(store, "demo", "alice", PAIRWISE, "random", holder="tab", split="train")
    for outcome in ("left", "right"):
        tab.judge_pair(tab.current(), outcome)
    app = AppTest.from_function(two_undo_presses, args=(store_url, True), default_timeout=TIMEOUT).run()
    assert not app.exception, app.exception
    assert [j.outcome for j in store.preferences.preference_judgements("demo", "alice", PAIRWISE)] == ["left"]
    store.close()
