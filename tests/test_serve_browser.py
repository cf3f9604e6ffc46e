"""`attnwalk serve` in a real browser (issue 31): Debian's chromium, headless, driven through its own
chromedriver (`apt-get install -y chromium chromium-driver fonts-noto-cjk`; no browser is
downloaded). The page shows the lesson picker, a lesson's first stage appears, a key moves to the
next stage, and the server stops leaving no process. Skipped, saying why, where they are missing.

The page draws the terminal on a canvas, so what it shows is read from the terminal itself
(xterm.js's buffer: the characters on screen), found as the page's FitAddon is handed it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("textual_serve", reason="textual-serve is not installed: pip install 'attnwalk[serve]'")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed: pip install -e '.[test]'")

from attnwalk.scenario.builtins import course_order  # noqa: E402
from served import Served, alive  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromedriver: apt-get install -y chromium chromium-driver fonts-noto-cjk")

# Run before the page's own scripts: keep the xterm.js Terminal the page creates, when its
# FitAddon is activated with it (`this._terminal = terminal`), so the test can read the screen.
KEEP_TERMINAL = """
Object.defineProperty(Object.prototype, "_terminal", {
  configurable: true,
  get() { return undefined; },
  set(value) {
    Object.defineProperty(this, "_terminal", {value, writable: true, configurable: true});
    if (value && value.buffer && value.buffer.active && value.loadAddon) window.__terminal = value;
  },
});
"""
SCREEN = """
const t = window.__terminal;
if (!t) return null;
const b = t.buffer.active, rows = [];
for (let y = 0; y < t.rows; y++) rows.push(b.getLine(b.viewportY + y).translateToString(true));
return rows.join("\\n");
"""


@pytest.fixture
def browser(tmp_path):
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 f"--user-data-dir={tmp_path / 'chromium'}", "--window-size=1000,700"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": KEEP_TERMINAL})
    yield driver
    driver.quit()


def screen(driver) -> str:
    return driver.execute_script(SCREEN) or ""


def shows(driver, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen(driver)
        if text in shown:
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not on the page, which shows:\n{screen(driver)}")


def press(driver, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    # the page's terminal takes keys where a click would put them: its input field
    driver.execute_script("document.querySelector('.xterm-helper-textarea').focus()")
    ActionChains(driver).send_keys(*keys).perform()


def test_a_browser_picks_a_lesson_walks_it_and_moves_a_stage_on_a_key(browser, tmp_path) -> None:
    from selenium.webdriver.common.keys import Keys

    with Served() as served:
        browser.get(served.url)
        picker = shows(browser, "attnwalk: pick a lesson")
        assert "river_bank" in picker and "女生撩刘海" in picker and "w walk" in picker
        browser.save_screenshot(str(tmp_path / "picker.png"))
        # keys before any click or focus: the page puts them in its terminal itself
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(browser).send_keys(*[Keys.DOWN] * course_order().index("river_bank"), Keys.ENTER).perform()
        first = shows(browser, "Stage 1 / 11")
        assert "by the river bank" in first
        press(browser, "n")
        second = shows(browser, "Stage 2 / 11")
        assert "E = EmbeddingTable[ids]" in second and "bank" in second
        browser.save_screenshot(str(tmp_path / "stage2.png"))
        press(browser, "q")  # the walk ends: the picker again, in Chinese after l
        shows(browser, "pick a lesson")
        press(browser, "l")
        chinese = shows(browser, "选一课")
        assert "女生撩刘海：从查表一路手算到 Z" in chinese and "q 退出" in chinese.splitlines()[-1]
        processes = served.descendants()
        assert len(processes) == 2  # this tab's session and its picker
        served.stop("ctrl-c")
    assert alive(processes) == set()
    assert "-closed" in browser.execute_script("return document.body.className")  # the page says so
    assert Path(tmp_path / "stage2.png").stat().st_size > 10_000  # a drawn page, not a blank one
