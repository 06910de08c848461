"""A real browser: Debian's headless Chromium, driven by Playwright, loads the page offline and finds a
tree already drawn, Step above the fold at 1400×1000; steps TALON, plays a few steps, shows an input error
without a traceback, opens SpecBound and sees the heatmap; checks Compare for AR over itself = 1.00× and an
error bar on each speed-up, Tune for each cell's range and the too-few-tokens warning, links, import and
Cancel. Phones, colour vision and dark mode: tests/test_browser_access.py. Screenshots go to
$SPECSCOPE_SCREENSHOTS (default: the test's temp folder)."""
import os
import re
import time
from pathlib import Path

import pytest

from ui.server import launched_app

pytestmark = pytest.mark.slow  # starts the app in a subprocess

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


TEXTS = """() => { window.ssTexts = []; const box = document.querySelector('#talon-text');
  new MutationObserver(() => { const t = box.querySelector('.ss-text'); if (t) window.ssTexts.push(t.textContent); })
    .observe(box, { childList: true, subtree: true, characterData: true }); }"""


def test_play_a_few_steps_then_pause(page):
    page.evaluate(TEXTS)  # record every text the page shows while playing
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
    seen = page.evaluate("window.ssTexts")
    texts = [t for i, t in enumerate(seen) if i == 0 or t != seen[i - 1]]
    assert len(texts) > shown_step(page), texts  # streamed: more text updates than steps
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))  # each one extends the one before
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


def start_compare(page, max_new_tokens: int) -> None:
    """Open Compare, set max new tokens and press Run all methods."""
    page.get_by_role("tab", name="Compare").click()
    tokens = page.locator("#compare-max-new input[type=number]")
    tokens.fill(str(max_new_tokens))
    tokens.press("Enter")
    page.click("#compare-run")


def wait_status(page, box: str, pattern: str, timeout_ms: int) -> None:
    """Wait for `pattern` (a JS regex) in the status line `box`; on a timeout, fail with what the line said."""
    try:
        page.wait_for_function(f"/{pattern}/.test(document.querySelector('{box}').textContent)", timeout=timeout_ms)
    except sync_api.TimeoutError:
        said = page.evaluate(f"document.querySelector('{box}')?.textContent")
        pytest.fail(f"{box} did not reach /{pattern}/ in {timeout_ms / 1000:.0f} s; it says: {said!r}")


def test_compare_ar_over_itself_is_one(page):
    start_compare(page, 16)  # enough tokens for a chain to take the 3 steps a range needs
    cells = ("document.querySelector('#compare-table').innerText.split(/[\\n\\t]/)"
             ".map(c => c.trim()).filter(c => c)")
    # the AR row is the reference the others are divided by: its own speed-up is exactly 1.00×
    page.wait_for_function(f"(() => {{ const c = {cells}; const i = c.indexOf('ar'); "
                           f"return i >= 0 && c.includes('specbound') && c[i + 5] === 'reference'; }})()",
                           timeout=300_000)
    # the ranges come with the last table, after the AR pass that follows the methods
    wait_status(page, "#compare-status", "done in", 60_000)
    c = page.evaluate(cells)
    i = c.index("ar")
    assert c[i + 4] == "1.00×", c[i:i + 7]
    ranged = r"\d+\.\d\d× \(\d+\.\d\d–\d+\.\d\d\)"
    shown = [c[c.index(m) + 4] for m in ("chain", "talon", "specbound")]
    assert all(re.fullmatch(rf"\d+\.\d\d×|{ranged}", v) for v in shown), shown
    assert any(re.fullmatch(ranged, v) for v in shown), shown  # a run of 3 steps or more comes with its range
    page.wait_for_selector("#compare-plot path.yerror", state="attached", timeout=60_000)
    assert page.locator("#compare-plot path.yerror").count() >= 4  # an error bar on each method's speed-up
    page.screenshot(path=str(page.shots / "compare.png"), full_page=True)


def test_tune_shows_each_cells_range_and_warns_of_too_few_tokens(page):
    """A tiny grid (1 prompt × 8 tokens): every cell carries its range, the summary says it is too few tokens
    to rank, and the fixed knobs the runs held are the ones the box shows."""
    page.get_by_role("tab", name="Tune").click()
    assert page.locator("#tune-fixed textarea, #tune-fixed input").first.input_value() == "K = 2, k = 1, T_shape = 0.5"
    for box, value in (("#tune-x", "0.1, 0.2"), ("#tune-y", "8")):
        page.locator(f"{box} textarea, {box} input").first.fill(value)
    for slider, value in (("#tune-prompts", 1), ("#tune-max-new", 8)):
        field = page.locator(f"{slider} input[type=number]")
        field.fill(str(value))
        field.press("Enter")
    page.click("#tune-run")
    wait_status(page, "#tune-status", "done in", 300_000)
    summary = page.locator("#tune-summary").inner_text()
    assert "too few tokens to rank" in summary and "Held fixed: K = 2, k = 1, T_shape = 0.5" in summary
    assert page.locator("#tune-summary [role=alert]").is_visible()
    cells = page.locator("#tune-speedup text").all_text_contents()
    ranged = [t for t in cells if re.fullmatch(r"\d+\.\d\d×\d+\.\d\d–\d+\.\d\d×⚠ few tokens", t.strip())]
    assert len(ranged) == 2, cells  # each cell: its speed-up, its range and the warning
    page.screenshot(path=str(page.shots / "tune.png"), full_page=True)


def test_copy_link_opens_the_same_settings(app, page):
    page.get_by_role("tab", name="TALON").click()
    prompt = page.locator("#talon-prompt textarea")
    prompt.fill("shared prompt\nline two")
    box = page.locator(".ss-knob input[type=number]").first  # N (node budget)
    box.fill("12")
    box.press("Enter")
    page.click("#talon-share")
    link = page.locator("#talon-link textarea, #talon-link input").first
    page.wait_for_function("(() => { const e = document.querySelector('#talon-link textarea, #talon-link input'); "
                           "return e && e.value.startsWith('http'); })()", timeout=30_000)
    url = link.input_value()
    assert "N=12" in url and "tab=talon" in url
    other = open_page(app)
    other.goto(url, wait_until="domcontentloaded")
    other.wait_for_function("document.querySelector('#talon-prompt textarea')?.value === 'shared prompt\\nline two'",
                            timeout=60_000)
    assert other.locator(".ss-knob input[type=number]").first.input_value() == "12"
    assert "Opened a shared link" in other.locator("#share-msg").text_content()
    other.close()


def test_a_link_with_bad_values_says_so_and_opens_its_tab(app):
    page = open_page(app)
    page.goto(page.url.split("?")[0] + "?tab=specbound&alpha=2&N=500&zoom=3", wait_until="domcontentloaded")
    page.get_by_text("N (node budget) must be between 1 and 128: 500 is used as 128").wait_for(timeout=60_000)
    assert "unknown parameter 'zoom'" in page.locator("#share-msg").text_content()
    assert page.get_by_role("tab", name="SpecBound").get_attribute("aria-selected") == "true"
    assert page.locator("#specbound-knobs .ss-knob input[type=number]").first.input_value() == "2"
    page.close()


def upload(page, box: str, path: Path) -> None:
    """Pick a file in a Gradio upload box the way a visitor does: clear it, click it, choose the file."""
    clear = page.locator(f"{box} button[aria-label='Clear' i], {box} button[title='Clear' i]")
    if clear.count():
        clear.first.click()
    with page.expect_file_chooser() as chooser:
        page.locator(f"{box} button.upload-container, {box} [aria-label='Click to upload or drop files']").first.click()
    chooser.value.set_files(str(path))


def test_import_an_exported_trace_and_refuse_a_bad_file(page, tmp_path):
    page.get_by_role("tab", name="TALON").click()
    page.wait_for_selector("#talon-tree .gtitle", timeout=240_000)  # the preview first: it must not land after
    title = "document.querySelector('#talon-tree .gtitle')?.textContent || ''"
    for _ in range(2):  # a run of (at least) two steps to export; each step's own title, not the last test's
        before = page.evaluate(title)
        page.click("#talon-step")
        page.wait_for_function(f"b => {{ const t = {title}; return t !== b && /step \\d/.test(t) && !/preview/.test(t); }}",
                               arg=before, timeout=240_000)
    page.get_by_text("Export or import a run's traces").first.click()
    page.click("#talon-export")
    download = page.locator("#talon-export-file a[download]")
    download.wait_for(timeout=60_000)
    with page.expect_download() as got:
        download.click()
    path = tmp_path / "trace.json"
    got.value.save_as(path)
    upload(page, "#talon-import", path)
    page.wait_for_function("/imported trace/.test(document.querySelector('#talon-tree .gtitle').textContent)",
                           timeout=60_000)
    assert "step 1" in page.locator("#talon-tree .gtitle").text_content()  # the replay starts at step 1
    # the key moves the replay only once the import has enabled it with both steps, and not from an input
    page.wait_for_function("(b => b && !b.disabled && Number(b.max) >= 2)"
                           "(document.querySelector('#talon-replay input[type=number]'))", timeout=30_000)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("ArrowRight")  # the replay keys walk through it
    page.wait_for_function("/step 2\\b.*imported/.test(document.querySelector('#talon-tree .gtitle').textContent)",
                           timeout=30_000)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    upload(page, "#talon-import", bad)
    page.get_by_text("the file is not JSON").first.wait_for(timeout=30_000)
    assert "Traceback" not in page.content()
    assert "imported trace" in page.locator("#talon-tree .gtitle").text_content()  # still shown, session kept


def test_an_imported_trace_with_markup_runs_no_script(app, tmp_path):
    from tests.hostile import plant_text, talon_export, write
    path = write(tmp_path, "xss.json", plant_text(talon_export(steps=2)))
    page = open_page(app)
    page.on("dialog", lambda d: (page.outside.append("dialog: " + d.message), d.dismiss()))
    page.wait_for_selector("#talon-tree .gtitle", timeout=240_000)  # the preview first: it must not land after
    page.get_by_text("Export or import a run's traces").first.click()
    upload(page, "#talon-import", Path(path))
    page.wait_for_function("/imported trace/.test(document.querySelector('#talon-tree .gtitle')?.textContent)",
                           timeout=60_000)
    page.wait_for_function("(b => b && !b.disabled)(document.querySelector('#talon-replay input[type=number]'))",
                           timeout=30_000)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("ArrowRight")  # replay the second step too
    page.wait_for_function("/step 2\\b.*imported/.test(document.querySelector('#talon-tree .gtitle').textContent)",
                           timeout=30_000)
    page.locator("#talon-tree .scatterlayer .point").nth(1).hover(force=True)  # a hover label with a token
    time.sleep(0.5)
    assert page.get_by_text('<img src=x onerror="window.__xss=1">').count() > 0  # the payload shown as text
    assert page.evaluate("window.__xss") is None and not page.outside
    assert page.evaluate("document.querySelectorAll('[onerror], img[src=x]').length") == 0
    page.goto(app[1] + "?deep_link=whatever&tab=specbound", wait_until="domcontentloaded")  # a deep link
    assert "deep_link" not in page.url and "tab=specbound" in page.url
    page.close()


def test_cancel_a_compare_run_keeps_the_page_usable(page):
    start_compare(page, 64)
    page.get_by_text("estimated").first.wait_for(timeout=60_000)  # the estimate comes first
    wait_status(page, "#compare-status", "1 of 13 done", 180_000)
    page.click("#compare-cancel")
    wait_status(page, "#compare-status", "Cancelled after", 30_000)
    assert "ar" in page.locator("#compare-table").inner_text().split()  # what finished stays
    page.screenshot(path=str(page.shots / "compare_cancelled.png"), full_page=True)
    start_compare(page, 8)  # the page is still usable: a new run goes to the end
    wait_status(page, "#compare-status", "done in", 300_000)
