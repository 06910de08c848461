"""A real browser: Debian's headless Chromium, driven by Playwright, loads the page offline, steps TALON,
sees the tree's nodes, plays a few steps, shows an input error without a traceback, opens SpecBound and
sees the heatmap. Screenshots go to $SPECSCOPE_SCREENSHOTS (default: the test's temp folder)."""
import os
import re
import time
from pathlib import Path

import pytest

from tests.app_server import launched_app

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
LOCAL = ("http://127.0.0.1", "data:", "blob:", "about:")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    shots = Path(os.environ.get("SPECSCOPE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with launched_app() as (url, _), sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.outside = []  # requests that left the machine
        page.on("request", lambda r: page.outside.append(r.url) if not r.url.startswith(LOCAL) else None)
        page.shots = shots
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector("#talon-step", timeout=60_000)
        yield page
        browser.close()


def shown_step(page) -> int:
    m = re.search(r"step (\d+)", page.locator("#talon-tree .gtitle").text_content() or "")
    return int(m.group(1)) if m else 0


def tree_points(page, plot="#talon-tree") -> int:
    return page.locator(f"{plot} .scatterlayer .point").count()


def test_step_draws_the_tree(page):
    prompt = page.locator("#talon-prompt textarea")
    assert prompt.input_value().strip()  # opens ready: an example prompt is filled in
    page.click("#talon-step")
    page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=60_000)
    assert tree_points(page) >= 3  # root, nodes, bonus star
    page.wait_for_selector("#static-tree .scatterlayer .point", timeout=60_000)  # the static tree beside it
    page.screenshot(path=str(page.shots / "talon.png"), full_page=True)
    assert not page.outside, f"the page fetched from outside: {page.outside[:5]}"


def test_play_a_few_steps_then_pause(page):
    page.click("#talon-play")
    deadline = time.time() + 60
    while time.time() < deadline:
        if shown_step(page) >= 3:
            break
        time.sleep(0.3)
    else:
        pytest.fail("playing did not reach step 3")
    page.click("#talon-play")  # pause
    page.wait_for_function("document.querySelector('#talon-play').textContent.includes('Play')", timeout=10_000)
    page.screenshot(path=str(page.shots / "talon_played.png"), full_page=True)


def test_replay_redraws_an_earlier_step(page):
    box = page.locator("#talon-replay input[type=number]")
    box.fill("1")
    box.press("Enter")
    page.wait_for_function("/step 1\\b/.test(document.querySelector('#talon-tree .gtitle').textContent)",
                           timeout=30_000)


def test_bad_input_shows_a_message_not_a_traceback(page):
    prompt = page.locator("#talon-prompt textarea")
    kept = prompt.input_value()
    prompt.fill("")
    page.click("#talon-step")
    page.get_by_text("the prompt is empty").first.wait_for(timeout=30_000)
    assert "Traceback" not in page.content()
    time.sleep(1.5)  # let a tick that was in flight when we paused land
    before = int(page.locator("#talon-replay input[type=number]").get_attribute("max"))  # steps so far
    prompt.fill(kept)
    page.click("#talon-step")  # the same run continues: the error did not lose the session
    page.wait_for_function(f"/step {before + 1}\\b/.test(document.querySelector('#talon-tree .gtitle').textContent)",
                           timeout=30_000)


def test_specbound_view_shows_the_heatmap(page):
    page.get_by_role("tab", name="SpecBound").click()
    page.click("#specbound-step")
    page.wait_for_selector("#specbound-heatmap .heatmaplayer image, #specbound-heatmap .hm", timeout=60_000)
    assert page.locator("#specbound-heatmap .gtitle").text_content().startswith("Layer × token confidence")
    page.screenshot(path=str(page.shots / "specbound.png"), full_page=True)
    assert not page.outside
