"""External systems end to end (issue 36): the app started with `make run`, driven in Chromium. A run
file is uploaded and a scoring service (the example service, started by the test) is added on the
Systems page; the run is compared on a whole split on the Compare page beside a built-in model, the
service ranks a dataset question on Ask and its worst questions are listed on Errors, as a model's
would be; then both are removed. With RERANK_LAB_SCREENSHOTS=docs/screenshots it refreshes
docs/screenshots/systems*.png."""

from __future__ import annotations

import re
from pathlib import Path

from qa_core.data.demo import load_demo
from tests.conftest import BROWSER_TIMEOUT_MS, add_choice, choose, choose_radio, enter_text, page_screenshots, settled
from tests.scoring_services import serving


def shown(text: str) -> re.Pattern[str]:
    """``text`` as the page shows it: escaped markdown puts a word joiner after a "word:" that
    Streamlit would take for an emoji or icon code."""
    return re.compile(re.escape(text).replace(":", ":\u2060?"))


def test_a_run_and_a_service_added_on_the_systems_page_go_where_models_go(
    running_app, page, screenshot_dir, tmp_path: Path
):
    from playwright.sync_api import expect

    run = tmp_path / "lengths.test.run"
    run.write_text("".join(f"{q.qid} Q0 {c.doc_id} 1 {len(c.text)} lengths\n"
                           for q in load_demo().split("test")[:20] for c in q.candidates))
    page.goto(f"{running_app.url}/Systems")
    expect(page.get_by_text("Add the run")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)  # the first run has put the demo corpus in the store: the example service reads it
    example = ["examples.scoring_service", "--model", "overlap", "--data", "demo", "--db", running_app.database_url]
    with serving(example) as service_url:
        _add_both(page, screenshot_dir, run, service_url)
        _run_on_compare(running_app, page, screenshot_dir)
        _service_on_ask_and_errors(running_app, page, screenshot_dir, service_url)
    page.goto(f"{running_app.url}/Systems")
    for system in ("system:lengths", "system:served"):
        _remove(page, system)


def _add_both(page, screenshot_dir, run: Path, service_url: str) -> None:
    from playwright.sync_api import expect

    page.locator("input[type=file]").set_input_files(str(run))
    # The upload is done once its chip shows the file without a spinner; only then is the name typed.
    expect(page.get_by_test_id("stFileChipName")).to_have_text(run.name, timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_test_id("stFileChipIconSpinner")).to_have_count(0, timeout=BROWSER_TIMEOUT_MS)
    add_run = page.get_by_role("button", name="Add the run")
    # The file's name suggests the run's, by the one name rule (its last extension dropped); typed over.
    expect(page.get_by_label("Name").first).to_have_value("lengths.test", timeout=BROWSER_TIMEOUT_MS)
    enter_text(page, page.get_by_label("Name").first, "lengths", ready=add_run)
    add_run.click()
    expect(page.get_by_text(shown("Added system:lengths: ranks 20 questions; lacks 8 of test"))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)

    page.get_by_role("tab", name="Add a service").click()
    enter_text(page, page.get_by_label("Scoring URL (POST)"), service_url)  # the run added may still be drawing
    add_service = page.get_by_role("button", name="Add the service")
    enter_text(page, page.get_by_label("Name").nth(1), "served", ready=add_service)
    add_service.click()
    expect(page.get_by_text(shown(f"Added system:served: a scoring service at {service_url} (overlap overlap)")))\
        .to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    # The systems, then the run's metrics on a split it ranks (test, not the first split, dev).
    expect(page.get_by_test_id("stDataFrame")).to_have_count(2)
    expect(page.get_by_test_id("stDataFrame").nth(1)).to_contain_text("over the 20 judged questions it covers")
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "systems")


def _run_on_compare(running_app, page, screenshot_dir) -> None:
    from playwright.sync_api import expect

    page.goto(f"{running_app.url}/Compare")
    expect(page.get_by_text("Whole split")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    choose_radio(page, "Whole split")
    add_choice(page, "Models (the first is the reference)", "system:lengths")
    expect(page.get_by_text(shown("system:lengths: a stored run of demo"))).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    box = page.get_by_test_id("stMultiSelect").filter(has_text="Models (the first is the reference)")
    expect(page.get_by_text(shown("bm25: nothing to train"))).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    box.get_by_role("button", name="Remove bm25").click()  # the second default makes room (3 at most)
    # The chip goes in the browser at once, its run comes later: ``settled`` right after the click
    # passed before that run began (at load 18 the server starts it seconds later), and the run then
    # ended under the list opened for the next pick, closing it (the pick waited 10 s for its option
    # three times). The page is not late: it reads the model list, systems included, on every run.
    # bm25's line under the box goes only when the run without it ends.
    expect(page.get_by_text(shown("bm25: nothing to train"))).to_have_count(0, timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    expect(box.locator("[data-tag]")).to_have_count(2)
    add_choice(page, "Models (the first is the reference)", "system:served")
    page.get_by_role("button", name="Compare on the split").click()
    expect(page.get_by_text("Every pair on map")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    means = page.get_by_test_id("stTable").first  # the means with their intervals, one row per model
    for model in ("system:lengths", "system:served", "smcnn"):  # a model, a run and a service side by side
        expect(means).to_contain_text(model, timeout=BROWSER_TIMEOUT_MS)
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "systems-compare")


def _service_on_ask_and_errors(running_app, page, screenshot_dir, service_url: str) -> None:
    """The service ranks a linked question on Ask (the page names it and its /info) and, still
    chosen on Errors reached through the sidebar, lists its worst questions there; then the run does
    both, Ask ranking a dataset question with it."""
    from playwright.sync_api import expect

    page.goto(f"{running_app.url}/Ask?dataset=demo&qid=demo-33&model=system:served")
    expect(page.get_by_text(shown(f"system:served: a scoring service at {service_url} (overlap overlap)")))\
        .to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_test_id("stDataFrame").first).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "ask-service")

    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Errors").click()  # no page load
    # The model the link chose on Ask carries over, as one chosen by hand does (it opened on bm25).
    expect(page.get_by_role("combobox", name="Model", exact=True)).to_have_value("system:served",
                                                                               timeout=BROWSER_TIMEOUT_MS)
    # Under the model box, and again in the line that says what the means are over.
    expect(page.get_by_text(shown(f"system:served: a scoring service at {service_url}"))).to_have_count(
        2, timeout=BROWSER_TIMEOUT_MS)
    worst = page.get_by_test_id("stDataFrame").first  # one row per question, worst first
    expect(worst).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(worst).to_contain_text("demo-", timeout=BROWSER_TIMEOUT_MS)
    choose(page, "Model", "system:lengths")  # the run too, on Errors and on Ask (no page load)
    expect(page.get_by_text(shown("system:lengths: a stored run of demo")).first).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)
    expect(worst).to_contain_text("demo-", timeout=BROWSER_TIMEOUT_MS)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Ask").click()
    expect(page.get_by_role("combobox", name="Model", exact=True)).to_have_value("system:lengths",
                                                                               timeout=BROWSER_TIMEOUT_MS)
    choose_radio(page, "Pick a dataset question")  # the run ranks only its dataset's questions
    ranked = load_demo().split("test")[0]  # one the run ranks (its first 20 test questions)
    choose(page, "Dataset question", f"{ranked.qid} [test] {ranked.text}", typed=ranked.qid)  # filtered down
    page.get_by_role("button", name="Rank", exact=True).click()
    expect(page.get_by_text(shown(f"system:lengths on demo · {len(ranked.candidates)} candidates, question {ranked.qid}")))\
        .to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    assert "Traceback" not in page.content()

    # The picked question and the model go along to Compare by the sidebar, and the question is still
    # there back on Ask (Streamlit forgets a left page's widgets: it opened on "Type a question").
    picked = f"{ranked.qid} [test] {ranked.text}"
    question_box = page.get_by_role("combobox", name="Dataset question", exact=True)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Compare").click()
    models = page.get_by_test_id("stMultiSelect").filter(has_text="Models (the first is the reference)")
    expect(models.locator("[data-tag]").first).to_contain_text("system:lengths", timeout=BROWSER_TIMEOUT_MS)
    expect(question_box).to_have_value(picked, timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Ask").click()
    expect(page.get_by_role("combobox", name="Model", exact=True)).to_have_value("system:lengths",
                                                                               timeout=BROWSER_TIMEOUT_MS)
    expect(question_box).to_have_value(picked, timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    assert "Traceback" not in page.content()


def _remove(page, system: str) -> None:
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Remove").click()
    choose(page, "System", system)
    page.get_by_role("button", name="Remove (labels stay)").click()
    expect(page.get_by_text(shown(f"Removed {system}; no label was touched."))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)
