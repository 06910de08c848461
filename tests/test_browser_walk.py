""""Walk me through this step" in Chromium (the launch pattern of tests/test_browser.py): the preview invites
the walk and the first Step visibly moves on; a TALON step walks in at least six stages while its tree grows;
every number a stage shows equals the exported trace's field; Next / Back / ← → / Esc work and the replay
keys still do once it is closed; the SpecBound walk runs; a shared link with a step opens at that step with its
own settings drawn, and continues from there."""
import html
import json
import re
import time

import pytest

from tests.test_browser import CHROMIUM, app, open_page  # noqa: F401 (the module's server and browser)
from tests.walk_helpers import resolve, shown_matches

pytestmark = pytest.mark.slow

NUMBERS = """(view) => [...document.querySelectorAll(`#${view}-walk-text .ss-walk-num`)]
  .map((e) => [e.dataset.field, e.dataset.spec, e.textContent])"""
DRAFTED = """() => { const gd = document.querySelector('#talon-walk-fig .js-plotly-plot');
  return (gd && gd.data || []).filter((t) => ['drafted', 'accepted', 'rejected', 'unreached'].includes(t.meta))
    .reduce((n, t) => n + t.x.length, 0); }"""


def text_test(selector: str, pattern: str) -> str:
    """A wait_for_function body: the element's text matches `pattern` (a redraw may remove it for a moment)."""
    return f"/{pattern}/.test(document.querySelector('{selector}')?.textContent || '')"


def title(page, plot: str = "#talon-tree") -> str:
    return page.locator(f"{plot} .gtitle").first.text_content() or ""


def stage_at(page, view: str) -> tuple[int, int, str]:
    """(stage shown, stages in all, its name), as the walk's heading says."""
    box = page.locator(f"#{view}-walk-text")
    return (int(box.locator(".ss-walk-at").text_content()), int(box.locator(".ss-walk-of").text_content()),
            box.locator(".ss-walk-name").text_content())


def wait_stage(page, view: str, n: int) -> None:
    page.wait_for_function(f"document.querySelector('#{view}-walk-text .ss-walk-at')?.textContent === '{n}'",
                           timeout=30_000)


def press(page, key: str) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur()")  # keys act outside text boxes
    page.keyboard.press(key)


def step_to(page, n: int, view: str = "talon") -> None:
    """Press Step n times, each time waiting for the view's own new step (not the preview) to be drawn."""
    plot = "#talon-tree" if view == "talon" else "#specbound-heatmap"
    for _ in range(n):
        before = title(page, plot)
        page.click(f"#{view}-step")
        page.wait_for_function(f"b => {{ const t = document.querySelector('{plot} .gtitle')?.textContent || ''; "
                               f"return t !== b && !/preview/.test(t); }}", arg=before, timeout=120_000)


def export(page, view: str, tmp_path) -> dict:
    """The view's run as its Export button downloads it."""
    if not page.locator(f"#{view}-export").is_visible():
        next(a for a in page.get_by_text("Export or import a run's traces").all() if a.is_visible()).click()
    page.click(f"#{view}-export")
    link = page.locator(f"#{view}-export-file a[download]")
    link.wait_for(timeout=60_000)
    with page.expect_download() as got:
        link.click()
    path = tmp_path / f"{view}.json"
    got.value.save_as(path)
    return json.loads(path.read_text())


def walk_numbers(page, view: str, step: dict, shadow: dict | None) -> tuple[int, list[str]]:
    """Through every stage with Next, checking each shown number against the exported step; (numbers, names)."""
    first, count, _ = stage_at(page, view)
    checked, names = 0, []
    for at in range(first, count + 1):
        wait_stage(page, view, at)
        names.append(stage_at(page, view)[2])
        for field, spec, shown in page.evaluate(NUMBERS, view):
            value = resolve(step, shadow, html.unescape(field))
            assert shown_matches(shown, value, spec), (names[-1], field, shown, value)
            checked += 1
        if at < count:
            page.click(f"#{view}-walk-next")
    return checked, names


def test_the_preview_invites_the_walk_and_the_first_step_moves_on(app):
    page = open_page(app)
    page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=240_000)
    assert "preview" in page.locator("#talon-walk-note").text_content()
    assert "PREVIEW" in page.locator("#talon-tree .annotation-text").all_text_contents()  # marked as one
    assert "ss-invite" in (page.locator("#talon-walk").get_attribute("class") or "")
    page.click("#talon-walk")  # the preview itself can be walked
    page.wait_for_selector("#talon-walk-text .ss-walk-say", timeout=60_000)
    assert stage_at(page, "talon")[1] >= 6 and "Preview" in page.locator("#talon-walk-text").text_content()
    page.click("#talon-walk-close")
    step_to(page, 1)
    # the first Step is visibly the visitor's own, not the preview drawn again
    page.wait_for_function(text_test("#talon-walk-note", "Your run · step 1 of 1"), timeout=30_000)
    assert "ss-invite" not in (page.locator("#talon-walk").get_attribute("class") or "")
    assert page.locator("#talon-walk-note .ss-walk-badge").is_visible()
    # issue 34, item 3: the same step drawn again would look the same; the visitor's own has no watermark and
    # says whose it is
    assert "PREVIEW" not in page.locator("#talon-tree .annotation-text").all_text_contents()
    assert "your run" in title(page)
    page.screenshot(path=str(page.shots / "walk_first_step.png"))
    page.close()


def test_a_talon_walk_grows_the_tree_and_quotes_the_trace(app, tmp_path):
    page = open_page(app)
    page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=240_000)
    step_to(page, 2)
    page.wait_for_selector("#static-tree .scatterlayer .point", timeout=120_000)  # the shadow is drawn: exported
    data = export(page, "talon", tmp_path)
    page.click("#talon-walk")
    page.wait_for_selector("#talon-walk-text .ss-walk-say", timeout=60_000)
    first, count, _ = stage_at(page, "talon")
    assert first == 1 and count >= 6
    counts, names = [], []
    for at in range(1, count + 1):
        wait_stage(page, "talon", at)
        names.append(stage_at(page, "talon")[2])
        page.wait_for_function(f"(n => document.querySelector('#talon-walk-fig .gtitle')?.textContent.includes(n))"
                               f"({json.dumps(stage_at(page, 'talon')[2])})", timeout=30_000)  # its own picture
        counts.append(page.evaluate(DRAFTED))
        if at == 3:
            page.screenshot(path=str(page.shots / "walk_level.png"))
        if at < count:
            page.click("#talon-walk-next")
    grown = counts[: names.index("Budget spent") + 1]  # the root, each level, then the whole tree as drafted
    assert grown[0] == 0 and grown[-1] == grown[-2] > 0 and names[1] == "Root Top-K"
    assert all(a <= b for a, b in zip(grown, grown[1:])) and len(set(grown)) >= 3  # the tree grows
    page.click("#talon-walk")  # from the first stage again, checking every number against the export
    wait_stage(page, "talon", 1)
    checked, names = walk_numbers(page, "talon", data["steps"][1], data["static_shadows"].get("1"))
    assert checked > 25 and {"The walk down", "The bonus token", "Verification"} <= set(names)
    assert "The static tree" in names
    page.screenshot(path=str(page.shots / "walk_talon.png"))
    page.close()


def test_walk_keys_and_the_replay_keys_once_it_is_closed(app):
    page = open_page(app)
    page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=240_000)
    step_to(page, 2)
    page.click("#talon-walk")
    wait_stage(page, "talon", 1)
    press(page, "ArrowRight")
    wait_stage(page, "talon", 2)
    page.click("#talon-walk-next")
    wait_stage(page, "talon", 3)
    press(page, "ArrowLeft")
    wait_stage(page, "talon", 2)
    page.click("#talon-walk-back")
    wait_stage(page, "talon", 1)
    assert "step 2" in title(page)  # the walk's keys did not replay steps
    details = "#talon-walk-text details.ss-walk-more"
    assert not page.locator(details).evaluate("d => d.open")  # a stage's numbers are folded under its lead
    page.click("#talon-walk-text details.ss-walk-more summary")
    page.click("#talon-walk-next")
    wait_stage(page, "talon", 2)
    page.wait_for_function(f"document.querySelector('{details}')?.open === true", timeout=10_000)  # stays open
    press(page, "Escape")
    page.wait_for_selector("#talon-walk-panel", state="hidden", timeout=30_000)
    press(page, "ArrowLeft")  # closed: ← replays the previous step again
    page.wait_for_function(text_test("#talon-tree .gtitle", "step 1\\b"), timeout=30_000)
    page.click("#talon-walk")  # the walk opens on the step shown
    page.wait_for_function(text_test("#talon-walk-text", "step 1 of 2"), timeout=30_000)
    page.close()


def test_the_specbound_walk_runs_and_quotes_the_trace(app, tmp_path):
    page = open_page(app)
    page.get_by_role("tab", name="SpecBound").click()
    page.wait_for_selector("#specbound-bars .main-svg", timeout=240_000)
    step_to(page, 1, "specbound")
    data = export(page, "specbound", tmp_path)
    page.click("#specbound-walk")
    page.wait_for_selector("#specbound-walk-text .ss-walk-say", timeout=60_000)
    checked, names = walk_numbers(page, "specbound", data["steps"][0], None)
    assert names[0] == "The rule" and names[-2:] == ["Verification", "The verdict"] and "Token 1" in names
    assert checked > 10
    page.click("#specbound-walk-back")
    wait_stage(page, "specbound", len(names) - 1)  # each move answers before the next is sent
    press(page, "ArrowLeft")
    wait_stage(page, "specbound", len(names) - 2)
    page.screenshot(path=str(page.shots / "walk_specbound.png"))
    page.close()


def test_a_shared_link_with_a_step_opens_there_with_its_own_settings(app):
    page = open_page(app)
    page.goto(page.url.split("?")[0] + "?tab=talon&N=12&K=2&step=3&new=24", wait_until="domcontentloaded")
    page.wait_for_function(text_test("#talon-tree .gtitle", "step 3\\b"), timeout=240_000)
    assert "preview" not in title(page)
    assert "of N = 12 nodes" in page.locator("#talon-budget").text_content()  # drawn with the link's own N
    assert page.locator(".ss-knob input[type=number]").first.input_value() == "12"
    page.wait_for_function(text_test("#talon-walk-note", "Your run · step 3 of 3"), timeout=30_000)
    page.click("#talon-share")  # its own link carries the step shown
    page.wait_for_function("(() => { const e = document.querySelector('#talon-link textarea, #talon-link input'); "
                           "return e && /step=3/.test(e.value); })()", timeout=30_000)
    step_to(page, 1)  # the visitor's Step continues the link's run
    assert re.search(r"step 4(?!\d)", title(page))
    time.sleep(0.5)
    page.close()
