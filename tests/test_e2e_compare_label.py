"""Compare and Label end to end: the app started with `make run`, driven in Chromium. Labels are
given with the keyboard shortcuts and read back from the app's store. With
RERANK_LAB_SCREENSHOTS=docs/screenshots it refreshes the README's screenshots."""

from __future__ import annotations

import re
import uuid

from db.store import Store
from tests.conftest import BROWSER_TIMEOUT_MS, choose_radio, enter_text, page_screenshots, settled

# A question both baselines answer first among the demo's BM25 candidates ("who discovered
# penicillin" is not: BM25 ranks "Some patients are allergic to penicillin." first, Fleming 8th).
DEMO_QUESTION, DEMO_ANSWER = "who developed the theory of relativity", "Albert Einstein"
PAIR = re.compile(r"^demo-\d+ · demo-\d+-\d+$")  # the caption naming the pair on screen


def test_compare_two_models_on_a_question(running_app, page, screenshot_dir):
    from playwright.sync_api import expect

    page.goto(f"{running_app.url}/Compare")
    question = page.get_by_role("textbox", name="Your question")
    expect(question).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    enter_text(page, question, DEMO_QUESTION)  # commits the value (a rerun) before the click
    page.get_by_role("button", name="Compare", exact=True).click()
    expect(page.get_by_text("Rankings side by side")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    for model in ("smcnn", "bm25"):  # the default pair: the demo's trained model (`make run`), then a baseline
        # The list headers, and a tab explaining the candidate through each model.
        expect(page.locator("strong").get_by_text(model, exact=True)).to_have_count(1)
        expect(page.get_by_role("tab", name=re.compile(rf"^{model} · #\d+ · score"))).to_have_count(1)
    # Both lists put the answer first: one list item per model.
    expect(page.locator("li", has_text=DEMO_ANSWER)).to_have_count(2)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "compare")


def test_label_five_pairs_with_the_keyboard(running_app, page, screenshot_dir):
    from playwright.sync_api import expect

    annotator = f"e2e-keys-{uuid.uuid4().hex[:8]}"  # the app is shared with the other e2e tests
    page.goto(f"{running_app.url}/Label")
    name = page.get_by_role("textbox", name="Your name")
    expect(name).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    enter_text(page, name, annotator, ready=page.get_by_role("button", name="2 · partly answers"))  # the first pair's
    pair = page.get_by_text(PAIR)
    expect(pair).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    page.get_by_role("heading", name="Label").click()  # keys go to the page, not to a text box

    idle = page.get_by_test_id("stApp")
    grades = [2, 0, 1, 4, 3]
    for grade in grades:
        # A key pressed mid-run could reach the previous pair's button, which the page ignores (a
        # judgement only counts for the pair on screen): wait until the run has drawn the buttons.
        expect(idle).to_have_attribute("data-test-script-state", "notRunning", timeout=BROWSER_TIMEOUT_MS)
        shown = pair.inner_text()
        qid, doc_id = shown.split(" · ")
        page.keyboard.press(str(grade))
        expect(page.get_by_text(f"Labelled {qid} / {doc_id} as {grade}")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_text(f"{len(grades)} of ", exact=False).first).to_be_visible()
    page_screenshots(page, screenshot_dir, "label")

    store = Store(running_app.database_url)
    try:
        labels = store.labels.current_label_records("demo", annotator)
        assert sorted(label.value for label in labels) == sorted(grades)
        last = max(labels, key=lambda label: label.label_id)
        expect(idle).to_have_attribute("data-test-script-state", "notRunning", timeout=BROWSER_TIMEOUT_MS)
        page.keyboard.press("u")  # undo takes back the last judgement, keeping it in the history
        expect(page.get_by_text("Took back your label")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
        assert len(store.labels.current_label_records("demo", annotator)) == len(grades) - 1
        (undone,) = [h for h in store.labels.label_history(last.candidate_id) if h["annotator"] == annotator]
        assert undone["id"] == last.label_id and undone["retracted_at"] is not None
    finally:
        store.close()
    assert "Traceback" not in page.content()


def test_compare_keys_before_a_name_say_that_one_is_needed(running_app, page, screenshot_dir):
    """Issue 45: on Compare, a grade key pressed before an annotator was named did nothing and said
    nothing; it now says in one sentence that a name is needed. Named, the key labels the pair, and
    Undo names it as saving did (qid / doc id, not the store's candidate id)."""
    from playwright.sync_api import expect

    annotator = f"e2e-compare-{uuid.uuid4().hex[:8]}"
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(f"{running_app.url}/Compare")
    expect(page.get_by_role("button", name="Compare", exact=True)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    choose_radio(page, "Pick a dataset question")
    page.get_by_role("button", name="Compare", exact=True).click()
    name = page.get_by_role("textbox", name="Annotator (your name, as on the Label page) to judge here")
    expect(name).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    page.get_by_role("heading", name="Rankings side by side").click()  # keys go to the page
    page.keyboard.press("3")
    warning = page.get_by_text("Not saved: type your name (as on the Label page) to judge here")
    expect(warning).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    warning.scroll_into_view_if_needed()
    page_screenshots(page, screenshot_dir, "compare-no-name")

    enter_text(page, name, annotator, ready=page.get_by_text(re.compile(rf"judge this candidate as {annotator}")))
    settled(page)
    page.get_by_role("heading", name="Rankings side by side").click()
    page.keyboard.press("3")
    saved = page.get_by_text(re.compile(r"^Labelled \S+ / \S+ as 3 \(answers\)\.$"))
    expect(saved).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    pair = saved.inner_text().removeprefix("Labelled ").split(" as ")[0]
    settled(page)
    page.keyboard.press("u")
    expect(page.get_by_text(f"Took back your label 3 of {pair} (it stays in the history).")).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)
    store = Store(running_app.database_url)
    try:
        assert store.labels.current_label_records("demo", annotator) == []
    finally:
        store.close()
    assert "Traceback" not in page.content()
