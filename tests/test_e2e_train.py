"""Train end to end: the app started with `make run`, SM-CNN retrained on the demo's gold labels from
Chromium (two epochs), the live progress seen and a new version registered. With
RERANK_LAB_SCREENSHOTS=docs/screenshots it refreshes docs/screenshots/train.png."""

from __future__ import annotations

import math
import re

from db.store import Store
from tests.conftest import BROWSER_TIMEOUT_MS, enter_text, page_screenshots


def test_train_page_retrains_and_registers_a_new_version(running_app, page, screenshot_dir):
    from playwright.sync_api import expect

    store = Store(running_app.database_url)
    before = len(store.models.model_versions("smcnn"))

    page.goto(f"{running_app.url}/Train")
    epochs = page.get_by_role("spinbutton", name=re.compile("Epochs"))
    expect(epochs).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_text("smcnn").first).to_be_visible()
    enter_text(page, epochs, "2")  # the page's first run may still be drawing: a value it drops is typed again
    page.get_by_role("button", name="Retrain").click()
    expect(page.get_by_text(re.compile(r"version \d+ registered"))).to_be_visible(timeout=BROWSER_TIMEOUT_MS)

    versions = store.models.model_versions("smcnn")
    assert len(versions) == before + 1
    newest = versions[-1]
    assert newest["training_data"]["dataset"] == "demo" and newest["training_data"]["train_labels"] > 0
    expect(page.get_by_text(f"version {newest['version']} registered")).to_be_visible()
    # The job's loss / dev-MAP curve and the versions' MAP-vs-labels curve, once the page has rerun.
    expect(page.locator(".js-plotly-plot")).to_have_count(2, timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_text("The pages use for demo:")).to_have_count(1)
    # The live curve's dev-MAP axis (the first chart's right axis): round ticks of its own, where it
    # synced them with the loss axis (0.5007, 0.555, 0.6092).
    ticks = [float(t) for t in page.locator(".js-plotly-plot").first.locator(".y2tick text").all_text_contents()]
    assert round_ticks(ticks), ticks
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "train")


def round_ticks(ticks: list[float]) -> bool:
    """Whether axis ticks are round: two or more, evenly spaced by 1, 2 or 5 times a power of ten,
    each a multiple of that step (plotly's own choice on an axis of its own)."""
    if len(ticks) < 2:
        return False
    step = ticks[1] - ticks[0]
    power = 10 ** math.floor(math.log10(step))
    return (any(math.isclose(step, m * power, rel_tol=1e-6) for m in (1, 2, 5))
            and all(math.isclose(b - a, step, rel_tol=1e-6) for a, b in zip(ticks, ticks[1:]))
            and all(math.isclose(t / step, round(t / step), abs_tol=1e-6) for t in ticks))
