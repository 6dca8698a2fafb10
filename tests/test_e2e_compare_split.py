"""Compare on a whole split end to end: the app started with `make run`, driven in Chromium. Three
models (the baselines and the SM-CNN `make run` trains), the Holm-corrected table, the sorted delta
chart, and a click on a bar that opens that question in Ask (in a new tab). With RERANK_LAB_SCREENSHOTS=docs/screenshots
it refreshes docs/screenshots/compare_split.png."""

from __future__ import annotations

import re

from tests.conftest import BROWSER_TIMEOUT_MS, add_choice, choose_radio, page_screenshots


def test_three_models_on_a_split_then_a_bar_opens_ask(running_app, page, screenshot_dir):
    from playwright.sync_api import expect

    page.goto(f"{running_app.url}/Compare")
    idle = page.get_by_test_id("stApp")
    expect(page.get_by_text("Whole split")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    choose_radio(page, "Whole split")
    add_choice(page, "Models (the first is the reference)", "overlap")  # a third beside the defaults: smcnn, bm25
    expect(idle).to_have_attribute("data-test-script-state", "notRunning", timeout=BROWSER_TIMEOUT_MS)
    page.get_by_role("button", name="Compare on the split").click()

    expect(page.get_by_text("Every pair on map")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_text("Holm-adjusted over the 3 pair(s) per metric")).to_be_visible()
    delta = page.locator(".js-plotly-plot").filter(has=page.locator(".gtitle", has_text="Δ AP per question"))
    expect(delta).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    bars = delta.locator("g.point")
    expect(bars).to_have_count(28)  # the demo's test questions
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "compare_split")

    expect(idle).to_have_attribute("data-test-script-state", "notRunning", timeout=BROWSER_TIMEOUT_MS)
    # Click the tallest bar where a user would: plotly finds the bar under the mouse (its drag layer
    # is on top), selects it, and Streamlit reruns the page with that selection.
    # (page_screenshots grew the viewport and gave it back, scrolled to the top: the chart may be below.)
    tallest = max(bars.all(), key=lambda bar: bar.bounding_box()["height"])
    tallest.scroll_into_view_if_needed()
    box = tallest.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    expect(delta.locator(".hoverlayer .hovertext")).to_be_visible()  # plotly knows which bar is under the mouse
    page.mouse.click(x, y)
    link = page.get_by_role("link", name=re.compile(r"^Open demo-\d+ in Ask$"))
    expect(link).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    qid = re.search(r"demo-\d+", link.inner_text()).group(0)
    with page.expect_popup() as popup:  # Ask opens in its own tab: the comparison stays where it was
        link.click()
    ask = popup.value
    expect(ask).to_have_url(re.compile(rf"/Ask\?.*qid={qid}"), timeout=BROWSER_TIMEOUT_MS)
    expect(ask.get_by_text("Ranked candidates")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    assert "Traceback" not in ask.content()
