"""Every figure type, as the pages draw it, read by Chromium at 1280 and 1920 px (issue 31): for
answers of 5, 20, 60 and 150 words and one of 4,999 characters (arcs only), and for two and three models (explanations, bump chart), and the
comparison tables and charts, the slices and the version curve, no two text labels overlap, no
label is cut off by its container and no text is smaller than 10 px (tests/layout_check.js); no arcs figure
is wider than its column or shrunk below 10 px (SVG_FITS); the AP scatter keeps its 0..1 axes (SQUARE_RANGES).
Streamlit's st.dataframe draws on a canvas, which no DOM check can read: the tables checked are the
st.table ones (Compare's means and pairs).

One Streamlit page (tests/fixtures/figures_app.py) draws them all through the pages' own functions
with made-up data, so one page load checks every figure; the viewport is resized in place and the
model tabs are opened one after another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import ROOT
from tests.conftest import BROWSER_TIMEOUT_MS, PLOTS_FIT, SCREENSHOT_WIDTHS, _free_port, _wait_healthy, settled
from tests.figures import SVG_FITS

MINIMUM_TEXT_PX = 10
CHECK = (Path(__file__).parent / "layout_check.js").read_text(encoding="utf-8")
# A square chart (an axis anchored to the other's scale) as drawn: its ranges as the figure sets them
# (issue 45: the AP scatter's axis ran -0.5..1.5 at 1920 px, widened to keep the square).
SQUARE_RANGES = """() => [...document.querySelectorAll(".js-plotly-plot")]
  .filter((plot) => plot.offsetParent && plot.layout.yaxis && plot.layout.yaxis.scaleanchor)
  .flatMap((plot) => ["xaxis", "yaxis"].map((axis) => [axis, plot._fullLayout[axis].range])
    .filter(([, range]) => Math.abs(range[0] + 0.05) > 1e-6 || Math.abs(range[1] - 1.05) > 1e-6)
    .map(([axis, range]) => `${plot._fullLayout.title.text}: ${axis} drawn ${range[0].toFixed(2)}..${range[1].toFixed(2)}`))"""


@pytest.fixture(scope="module")
def figures_url(chromium, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The figure gallery served by Streamlit (no store, no trained model: a few seconds)."""
    url = f"http://127.0.0.1:{_free_port()}"
    log = tmp_path_factory.mktemp("figures") / "streamlit.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STREAMLIT_SERVER_HEADLESS": "true",
           "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none", "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    with log.open("w") as handle:
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "tests/fixtures/figures_app.py",
             "--server.port", url.rsplit(":", 1)[1]],
            cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        _wait_healthy(url, server, log)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


def test_no_label_overlaps_is_cut_off_or_too_small_at_any_length(chromium, figures_url):
    context = chromium.new_context(viewport={"width": SCREENSHOT_WIDTHS[0], "height": 1000})
    try:
        page = context.new_page()
        page.goto(figures_url)
        settled(page)
        page.locator(".rl-arcs").first.wait_for(timeout=BROWSER_TIMEOUT_MS)
        tabs = page.get_by_role("tab")
        assert tabs.count() == 2 + 3  # the two- and three-model explanations
        problems: list[str] = []
        for width in SCREENSHOT_WIDTHS:
            page.set_viewport_size({"width": width, "height": 1000})
            for tab in [None, *(tabs.nth(i) for i in range(tabs.count()))]:
                if tab is not None:
                    tab.click()
                page.wait_for_function(PLOTS_FIT, timeout=BROWSER_TIMEOUT_MS)
                where = f"at {width} px" + (f", tab {tab.inner_text()!r}" if tab is not None else "")
                problems += [f"{where}: {problem}" for problem in page.evaluate(CHECK, MINIMUM_TEXT_PX)]
                problems += [f"{where}: {problem}" for problem in page.evaluate(SVG_FITS, MINIMUM_TEXT_PX)]
                problems += [f"{where}: {problem}" for problem in page.evaluate(SQUARE_RANGES)]
        assert "Traceback" not in page.content()
        assert not problems, f"{len(problems)} layout problems, the first:\n" + "\n".join(problems[:20])
    finally:
        context.close()
