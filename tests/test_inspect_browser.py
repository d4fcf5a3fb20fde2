"""The inspect page in a real browser: headless Chromium renders it, with its charts, without console errors.

Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them) and `selenium` (the `dev`
extra); skips, saying so, only where Chromium is not installed. The screenshot goes to
the test's tmp folder; set `FOLDLINE_INSPECT_SCREENSHOT=docs/img/inspect.png` to also refresh the
README's copy.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foldline.inspection import render_html, session_view
from foldline.sessions import load_session

from ._inspect_session import SCRIPT_USAGE, record_session

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason=f"headless Chromium not installed ({CHROMIUM}, {CHROMEDRIVER}): "
        "apt-get install chromium chromium-driver",
    ),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver  # the dev extra: missing it is a failure, not a skip

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,1500"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.anyio
async def test_the_page_renders_its_charts_without_console_errors(tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    workspace = tmp_path / "ws"
    workspace.mkdir()
    await record_session(tmp_path / "s.jsonl", workspace)
    page = tmp_path / "inspect.html"
    page.write_text(render_html(session_view(load_session(tmp_path / "s.jsonl"))), encoding="utf-8")

    browser.get(page.as_uri())

    assert browser.title == "foldline inspect: inspect-demo"
    charts = {svg.get_attribute("id"): svg for svg in browser.find_elements(By.CSS_SELECTOR, "svg")}
    assert set(charts) == {"context-chart", "cache-chart", "cost-chart"}
    for svg in charts.values():
        size = svg.size
        assert size["width"] > 300
        assert size["height"] > 100, "a chart collapsed to nothing"
    points = charts["context-chart"].find_elements(By.CSS_SELECTOR, "circle")
    assert len(points) == len(SCRIPT_USAGE)
    kinds = {m.get_attribute("class") for m in browser.find_elements(By.CSS_SELECTOR, "line.marker")}
    assert {
        "marker snip",
        "marker collapse",
        "marker compact",
        "marker receipt",
        "marker cache_break",
    } <= kinds
    # The injected prompt shows as text; nothing of it became an element.
    assert browser.find_elements(By.TAG_NAME, "script") == []
    assert [b for b in browser.find_elements(By.TAG_NAME, "b") if b.text == "bold"] == []
    assert "<script>alert('x')</script>" in browser.find_element(By.ID, "events").text
    logs = browser.get_log("browser")
    assert [entry for entry in logs if entry["level"] in ("SEVERE", "WARNING")] == []

    shot = tmp_path / "inspect.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000, "the screenshot is blank"
    target = os.environ.get("FOLDLINE_INSPECT_SCREENSHOT")
    if target:
        shutil.copyfile(shot, target)
