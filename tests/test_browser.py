"""A real browser: Debian's headless Chromium, driven by Playwright, loads the page offline and finds a
tree already drawn, Step above the fold at 1400×1000; steps TALON, plays a few steps, shows an input error
without a traceback, opens SpecBound and sees the heatmap; checks a phone width for horizontal overflow,
dark mode for token contrast, and Compare for AR over itself = 1.00×. Screenshots go to
$SPECSCOPE_SCREENSHOTS (default: the test's temp folder)."""
import os
import re
import time
from pathlib import Path

import pytest

from ui.server import launched_app

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
LOCAL = ("http://127.0.0.1", "data:", "blob:", "about:")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """(browser, url, screenshot folder): one server and one Chromium for the whole module."""
    shots = Path(os.environ.get("SPECSCOPE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with launched_app() as (url, _), sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield browser, url, shots
        browser.close()


def open_page(app, width: int = 1400, height: int = 1000, scheme: str = "light"):
    browser, url, shots = app
    page = browser.new_page(viewport={"width": width, "height": height}, color_scheme=scheme)
    page.outside = []  # requests that left the machine
    page.on("request", lambda r: page.outside.append(r.url) if not r.url.startswith(LOCAL) else None)
    page.shots = shots
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#talon-step", timeout=60_000)
    return page


@pytest.fixture(scope="module")
def page(app):
    page = open_page(app)
    yield page
    page.close()


def test_a_tree_is_drawn_before_any_click_and_step_is_above_the_fold(page):
    page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=240_000)  # the start-up preview step
    assert tree_points(page) >= 3 and "preview" in page.locator("#talon-tree .gtitle").text_content()
    box = page.locator("#talon-step").bounding_box()
    assert box is not None and box["y"] + box["height"] <= 1000  # in the first viewport at 1400×1000
    page.screenshot(path=str(page.shots / "talon_open.png"))


def shown_step(page) -> int:
    m = re.search(r"step (\d+)", page.locator("#talon-tree .gtitle").text_content() or "")
    return int(m.group(1)) if m else 0


def tree_points(page, plot="#talon-tree") -> int:
    return page.locator(f"{plot} .scatterlayer .point").count()


def test_step_draws_the_tree(page):
    prompt = page.locator("#talon-prompt textarea")
    assert prompt.input_value().strip()  # opens ready: an example prompt is filled in
    page.click("#talon-step")
    page.wait_for_function("!/preview/.test(document.querySelector('#talon-tree .gtitle').textContent)",
                           timeout=60_000)  # the visitor's own step replaced the preview
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


def test_out_of_range_knob_says_its_range(page):
    page.get_by_role("tab", name="TALON").click()
    box = page.locator(".ss-knob input[type=number]").first  # N (node budget)
    box.fill("0")
    msg = page.locator(".ss-knob-msg").first
    msg.wait_for(state="visible", timeout=10_000)
    assert "between 1 and 128" in msg.text_content()
    box.fill("60")
    assert not msg.is_visible()


def test_no_horizontal_overflow_on_a_phone(app):
    page = open_page(app, 390, 844)
    page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=240_000)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    step = page.locator("#talon-step").bounding_box()
    tree = page.locator("#talon-tree").bounding_box()
    knobs = page.locator("#talon-knobs").bounding_box()
    assert step["y"] < tree["y"] < knobs["y"]  # prompt and Step, then the tree, then the knobs
    page.screenshot(path=str(page.shots / "phone.png"), full_page=False)
    page.close()


CONTRAST = """(sel) => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
                               .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
  const bg = (el) => { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el).backgroundColor);
                       if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3); } return [255, 255, 255]; };
  return [...document.querySelectorAll(sel)].filter((e) => e.offsetParent !== null).map((e) => {
    const a = lum(rgb(getComputedStyle(e).color)), b = lum(bg(e));
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  });
}"""


def test_dark_mode_token_text_is_readable(app):
    page = open_page(app, scheme="dark")
    page.wait_for_selector(".ss-tok", timeout=240_000)  # the preview's committed tokens
    assert page.evaluate("document.body.classList.contains('dark')")
    ratios = page.evaluate(CONTRAST, ".ss-tok, .ss-prompt")
    assert ratios and min(ratios) >= 4.5, ratios
    page.wait_for_function("(document.querySelector('#talon-tree .js-plotly-plot') || {})._fullLayout?.paper_bgcolor "
                           "=== '#111827'", timeout=30_000)  # the figures follow the page into the dark
    page.screenshot(path=str(page.shots / "dark.png"))
    page.close()


def test_compare_ar_over_itself_is_one(page):
    page.get_by_role("tab", name="Compare").click()
    tokens = page.locator("#compare-max-new input[type=number]")
    tokens.fill("8")
    tokens.press("Enter")
    page.click("#compare-run")
    cells = ("document.querySelector('#compare-table').innerText.split(/[\\n\\t]/)"
             ".map(c => c.trim()).filter(c => c)")
    # the AR row is the reference the others are divided by: its own speed-up is exactly 1.00×
    page.wait_for_function(f"(() => {{ const c = {cells}; const i = c.indexOf('ar'); "
                           f"return i >= 0 && c.includes('specbound') && c[i + 5] === 'reference'; }})()",
                           timeout=300_000)
    c = page.evaluate(cells)
    i = c.index("ar")
    assert c[i + 4] == "1.00×", c[i:i + 7]
    page.screenshot(path=str(page.shots / "compare.png"), full_page=True)
