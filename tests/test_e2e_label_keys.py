"""The Label page with the keyboard only, in Chromium, as a new user tries it (issue 21): type a
name, label, change the queue order and keep labelling with the next digit, leave a box with
Escape, capital S and U, switch views by key. Nothing is clicked; labels are read back from the
app's store."""

from __future__ import annotations

import re
import uuid

from db.store import Store
from tests.conftest import BROWSER_TIMEOUT_MS, page_screenshots, settled

PAIR = re.compile(r"^demo-\d+ · demo-\d+-\d+$")


def open_label_page_as(page, url: str, annotator: str) -> None:
    """The Label page, the annotator's name typed after N and Enter: nothing clicked."""
    from playwright.sync_api import expect

    page.goto(f"{url}/Label")
    expect(page.get_by_role("textbox", name="Your name")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)  # as a user sees it
    settled(page)
    page.wait_for_function("window.rerankLabKeysInstalled === true")  # the page's key script ran
    page.keyboard.press("n")  # N: the name box
    page.keyboard.type(annotator)
    page.keyboard.press("Enter")


def test_label_page_with_the_keyboard_only(running_app, page):
    from playwright.sync_api import expect

    annotator = f"e2e-only-keys-{uuid.uuid4().hex[:8]}"

    def focus_is_free() -> bool:
        return page.evaluate("document.activeElement === document.body || document.activeElement === null")

    def judge(grade: int) -> None:
        settled(page)
        qid, doc_id = page.get_by_text(PAIR).inner_text().split(" · ")
        page.keyboard.press(str(grade))
        expect(page.get_by_text(f"Labelled {qid} / {doc_id} as {grade}")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)

    open_label_page_as(page, running_app.url, annotator)
    expect(page.get_by_text(PAIR)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    judge(2)  # the first pair's buttons may not be drawn yet: the key waits for them

    # O: the queue order; pick "diversity" by typing and Enter; the next digit labels.
    settled(page)
    page.keyboard.press("o")
    page.keyboard.type("diversity")
    page.keyboard.press("Enter")
    order = page.get_by_role("combobox", name="Queue order")
    expect(order).to_have_value("diversity: one pair of each question in turn", timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    assert focus_is_free()
    judge(1)

    # Escape leaves a box without choosing anything.
    settled(page)
    page.keyboard.press("o")
    assert not focus_is_free()
    page.keyboard.press("Escape")
    page.wait_for_function("document.activeElement === document.body")
    judge(4)

    # Capital letters work as the small ones: S skips, U undoes (this tab's last label, the 4).
    settled(page)
    qid, doc_id = page.get_by_text(PAIR).inner_text().split(" · ")
    page.keyboard.press("Shift+S")
    expect(page.get_by_text(f"Skipped {qid} / {doc_id}")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    page.keyboard.press("Shift+U")
    expect(page.get_by_text("Took back your label")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)

    # A and L switch views; after that the digits label again.
    settled(page)
    page.keyboard.press("a")
    expect(page.get_by_text("Share of pairs judged by two annotators")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    page.keyboard.press("l")
    expect(page.get_by_text(PAIR)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    assert focus_is_free()
    judge(3)
    assert "Traceback" not in page.content()

    store = Store(running_app.database_url)
    try:
        labels = store.labels.current_label_records("demo", annotator)
        assert sorted(label.value for label in labels) == [1, 2, 3]  # the 4 was undone; nothing typed into a box
    finally:
        store.close()


ITEM = re.compile(r"^demo-\d+ · (pairwise|topk)$")


def test_pairwise_and_topk_modes_with_the_keyboard_only(running_app, page):
    from playwright.sync_api import expect

    annotator = f"e2e-preferences-{uuid.uuid4().hex[:8]}"

    def choose_mode(mode: str) -> None:
        settled(page)
        page.keyboard.press("j")  # J: the judging mode box
        page.keyboard.type(mode)
        page.keyboard.press("Enter")
        expect(page.get_by_text(re.compile(rf"^demo-\d+ · {mode}$"))).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
        settled(page)
        assert page.evaluate("document.activeElement === document.body || document.activeElement === null")

    def press(key: str, notice: str) -> None:
        settled(page)
        qid = page.get_by_text(ITEM).inner_text().split(" · ")[0]
        page.keyboard.press(key)
        expect(page.get_by_text(f"Judged {qid}: {notice}")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)

    open_label_page_as(page, running_app.url, annotator)
    expect(page.get_by_text(PAIR)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)

    choose_mode("pairwise")
    expect(page.get_by_text("1 left better · 2 right better · 3 tie (equally good) · 0 both bad", exact=False)).to_be_visible()
    press("2", "right is better")
    press("3", "tie: equally good")
    settled(page)
    page.keyboard.press("u")  # this tab's last judgement, the tie
    expect(page.get_by_text("Took back your judgement")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)

    choose_mode("topk")  # k = 1: the first pick saves the pool
    press("2", "picked 2.")
    press("0", "none fits.")
    assert "Traceback" not in page.content()

    store = Store(running_app.database_url)
    try:
        assert [j.outcome for j in store.preferences.preference_judgements("demo", annotator, "pairwise")] == ["right"]
        first, second = store.preferences.preference_judgements("demo", annotator, "topk")
        assert first.picked == (first.shown[1],) and second.picked == ()
        assert store.labels.current_label_records("demo", annotator) == []  # no digit became a graded label
    finally:
        store.close()


def test_calibration_with_the_keyboard_only(running_app, page):
    """A new annotator's calibration on two gold pairs by keys alone, the report, B to begin real work."""
    from playwright.sync_api import expect

    annotator = f"e2e-calibration-{uuid.uuid4().hex[:8]}"

    store = Store(running_app.database_url)
    store.calibration.set_calibration("demo", True, 2, "e2e-lead")
    try:
        open_label_page_as(page, running_app.url, annotator)
        for number, grade in ((1, "3"), (2, "0")):
            expect(page.get_by_text(f"Calibration: gold pair {number} of 2", exact=False)).to_be_visible(
                timeout=BROWSER_TIMEOUT_MS)
            settled(page)
            qid, doc_id = page.get_by_text(PAIR).inner_text().split(" · ")
            page.keyboard.press(grade)
            if number == 1:
                expect(page.get_by_text(f"Calibration pair {qid} / {doc_id}: {grade} saved")).to_be_visible(
                    timeout=BROWSER_TIMEOUT_MS)
        expect(page.get_by_text("Your calibration against gold")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
        settled(page)
        page.keyboard.press("2")  # no pair on screen: labels nothing
        settled(page)
        page.keyboard.press("b")  # B: begin real work
        expect(page.get_by_text("Keys: 0–4 judge the pair", exact=False)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
        settled(page)
        qid, doc_id = page.get_by_text(PAIR).inner_text().split(" · ")
        page.keyboard.press("4")
        expect(page.get_by_text(f"Labelled {qid} / {doc_id} as 4")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
        assert "Traceback" not in page.content()

        assert [j.value for j in store.calibration.calibration_judgements("demo", annotator)] == [3, 0]
        assert [label.value for label in store.labels.current_label_records("demo", annotator)] == [4]  # not the 2
    finally:
        store.calibration.set_calibration("demo", False, 2, "e2e-lead")  # the other browser tests label without it
        store.close()


def test_a_grade_pressed_at_once_after_typing_a_new_name_is_not_lost(running_app, page):
    """Issue 32: in a fresh tab, a name typed and a grade pressed at once; the run that draws the
    first pair (and maps the digits) has not arrived yet when the digit does, so the key waits for it."""
    from playwright.sync_api import expect

    annotator = f"e2e-first-key-{uuid.uuid4().hex[:8]}"
    open_label_page_as(page, running_app.url, annotator)  # ends with Enter in the name box
    page.keyboard.press("2")  # at once: no wait for the pair
    expect(page.get_by_text(re.compile(r"^Labelled demo-\d+ / demo-\d+-\d+ as 2"))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)
    store = Store(running_app.database_url)
    try:
        assert [label.value for label in store.labels.current_label_records("demo", annotator)] == [2]
    finally:
        store.close()


HEADED_GUIDELINES = ("# Relevance guidelines\n\n## What counts as an answer\n\nA candidate **answers** when it names "
                     "the thing asked.\n\n### Dates\n\nA year alone partly answers a *when* question.\n\n"
                     + "\n".join(f"- rule {n}: judge the candidate on its own, not on the rest of its pool" for n in range(12)))


def test_guidelines_with_headings_leave_the_buttons_in_view(running_app, page, screenshot_dir):
    """Issue 45: guidelines that start with a heading pushed the grade buttons below the fold at
    1280x1000; the panel beside the pair now scrolls within its height, its headings small, in the
    graded mode and the pairwise one (which lists no 0-4 scale)."""
    from playwright.sync_api import expect

    store = Store(running_app.database_url)
    try:
        store.annotation.save_guidelines("demo", HEADED_GUIDELINES, "e2e-lead")
    finally:
        store.close()
    page.set_viewport_size({"width": 1280, "height": 1000})
    open_label_page_as(page, running_app.url, f"e2e-guidelines-{uuid.uuid4().hex[:8]}")
    expect(page.get_by_text(PAIR)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_role("heading", name="Relevance guidelines")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    for key in ("grade-0", "grade-4", "skip", "undo"):
        expect(page.locator(f".st-key-{key} button")).to_be_in_viewport(ratio=1.0)
    heading = page.get_by_role("heading", name="Relevance guidelines").bounding_box()["height"]
    assert heading < 40, f"the guidelines' title is {heading} px tall"
    page.screenshot(path=str(screenshot_dir / "label-guidelines.png"))  # the viewport a user sees first

    settled(page)
    page.keyboard.press("j")
    page.keyboard.type("pairwise")
    page.keyboard.press("Enter")
    expect(page.get_by_text(ITEM)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    for key in ("pair-left", "pair-both_bad", "undo"):
        expect(page.locator(f".st-key-{key} button")).to_be_in_viewport(ratio=1.0)
    expect(page.get_by_text("holds part of the answer", exact=False)).to_have_count(0)  # no 0-4 scale: no grade here
    page.screenshot(path=str(screenshot_dir / "label-guidelines-pairwise.png"))
    page_screenshots(page, screenshot_dir, "label-pairwise")
