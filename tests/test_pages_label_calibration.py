"""Calibration on the Label page through AppTest (issue 21, item 1), in local mode and in team mode
as the admin: turned on in the Guidelines view, a new annotator judges the gold pairs first without
seeing gold, sees their agreement with gold before real work, and the dashboard shows the result.
Real store (SQLite in tmp), real demo corpus."""

from __future__ import annotations

import pytest

from db.store import Store
from qa_core.types import Candidate, Dataset, Question
from tests import pages
from tests.pages import LABEL, open_page

pytestmark = pytest.mark.usefixtures("both_modes")  # local mode, and team mode as the admin


def start(name: str):
    """The Label page as ``name`` (local mode) or as the signed-in admin (team mode)."""
    app = open_page(LABEL)
    if pages.SIGNED_IN is None:
        app.text_input(key="new_annotator").input(name).run()
    assert not app.exception, app.exception
    return app


def shown_pair(app) -> str:
    return next(c.value for c in app.caption if c.value.startswith("demo-") and " · " in c.value)


def progress(app) -> str:
    return app.get("progress")[0].proto.text


def test_a_new_annotator_calibrates_on_gold_first_and_sees_agreement_before_real_work(store_url):
    app = start("alice")
    app.radio(key="label_view").set_value("Guidelines").run()
    assert any("Now off (the default)" in c.value for c in app.caption)
    app.checkbox(key="calibration_on:demo").check()
    app.number_input(key="calibration_size:demo").set_value(3)
    app.button[[b.label for b in app.button].index("Save calibration")].click().run()
    assert not app.exception, app.exception
    store = Store(store_url)
    settings = store.calibration.calibration_settings("demo")
    assert (settings.enabled, settings.pairs) == (True, 3)
    annotator = settings.changed_by  # alice, or the signed-in admin

    app.radio(key="label_view").set_value("Label").run()
    shown = []
    for number, grade in enumerate((2, 0, 3), 1):
        assert progress(app).startswith(f"Calibration: gold pair {number} of 3")
        assert not app.metric and not app.dataframe  # gold stays hidden until the end
        assert not any("gold" in m.value.lower() for m in app.markdown)
        keys = next(c.value for c in app.caption if c.value.startswith("Keys:"))
        assert "0–4 judge the gold pair" in keys and not [b for b in app.button if b.key in ("skip", "undo")]
        shown.append(shown_pair(app))
        app.button(key=f"grade-{grade}").click().run()
        assert not app.exception, app.exception

    judged = store.calibration.calibration_judgements("demo")
    assert [f"{j.qid} · {j.doc_id}" for j in judged] == shown and [j.value for j in judged] == [2, 0, 3]
    assert {j.annotator for j in judged} == {annotator}
    assert store.labels.current_labels("demo") == {}  # calibration is not labelling
    agree = sum(int(g > 0) == j.gold for g, j in zip((2, 0, 3), judged))
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Exact agreement"] == f"{agree / 3:.0%}" and metrics["Gold pairs"] == "3"
    table = app.dataframe[0].value
    assert table["your grade"].tolist() == [2, 0, 3] and table["gold"].tolist() == [j.gold for j in judged]
    assert not [b for b in app.button if b.key == "grade-0"]  # a digit labels nothing while the report shows
    assert {b.key: b.proto.shortcut for b in app.button if b.key == "begin_work"} == {"begin_work": "b"}

    app.button(key="begin_work").click().run()  # real work begins: the queue
    assert any(c.value.startswith("Keys: 0–4 judge the pair") for c in app.caption)
    app.button(key="grade-1").click().run()
    assert [judgements[annotator] for judgements in store.labels.current_labels("demo").values()] == [1]
    assert len(store.calibration.calibration_judgements("demo")) == 3

    again = start("alice")  # another tab later: calibrated already, straight to work
    assert not progress(again).startswith("Calibration") and again.button(key="grade-0")

    app.radio(key="label_view").set_value("Agreement").run()
    assert not app.exception, app.exception
    (row,) = next(d.value for d in app.dataframe if "exact agreement" in d.value.columns).to_dict("records")
    assert (row["annotator"], row["pairs judged"], row["of"]) == (annotator, 3, 3)
    assert row["exact agreement"] == pytest.approx(agree / 3)
    store.close()


def test_gold_pairs_and_their_report_escape_the_data(store_url):
    store = Store(store_url)
    html = "<script>alert(1)</script> **bold** [link](http://example.org)"
    store.datasets.import_dataset(Dataset("xss", [Question("q1", f"who wrote {html}?", [
        Candidate("d1", f"{html} wrote it", label=1), Candidate("d2", "nothing here", label=0)], split="train")]))
    store.calibration.set_calibration("xss", True, 2, "lead")
    app = start("alice")  # the only dataset: the demo is imported into an empty store only
    seen = []
    for _ in range(2):  # alice's own order: 4 for the right answer, 0 for the other
        seen.append("\n".join(m.value for m in app.markdown))
        grade = 4 if "wrote it" in seen[-1] else 0
        app.button(key=f"grade-{grade}").click().run()
        assert not app.exception, app.exception
    text = "\n".join(seen)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>" not in text and "**bold**" not in text
    assert app.dataframe[0].value["agrees"].tolist() == [True, True]
    assert {m.label: m.value for m in app.metric}["Exact agreement"] == "100%"
    store.close()


def test_the_setting_says_who_calibrates_as_the_queue_decides(store_url):
    """Issue 45: the caption said everyone "without a calibration record" calibrates; one who has
    labelled as many pairs as the run has is not asked (rightly), and now the caption says so."""
    name = "ada@example.org" if pages.SIGNED_IN else "alice"
    store = Store(store_url)
    app = start(name)
    store.calibration.set_calibration("demo", True, 2, "lead")
    for row in store.datasets.candidate_rows("demo", split="train")[:2]:
        store.labels.add_label(row.candidate_id, name, 1)
    app.run()
    assert not progress(app).startswith("Calibration"), "two labels already: not new, no calibration"
    app.radio(key="label_view").set_value("Guidelines").run()
    (line,) = [c.value for c in app.caption if c.value.startswith("Now on, 2 gold pairs")]
    assert "fewer than 2 current labels" in line and "one who has labelled 2 pairs or more here is not asked" in line
    assert "without a calibration record" not in line
    store.close()
