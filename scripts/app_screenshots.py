"""Screenshots of every view for docs/app.md, taken in headless Debian Chromium against a launched app.

    python scripts/app_screenshots.py [--out docs/screenshots]

Runs a few real steps of each method and a small Compare and Tune run, so it takes a minute on a CPU."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.sync_api import sync_playwright  # noqa: E402

from ui.server import launched_app  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def wait_talon_step(page, n: int) -> None:
    """Wait until the TALON tree's title says it shows the visitor's own step n (not the start-up preview)."""
    page.wait_for_function(f"(t => /step {n}\\b/.test(t) && !/preview/.test(t))"
                           f"(document.querySelector('#talon-tree .gtitle')?.textContent || '')", timeout=60_000)


def extra_views(browser, url: str, out: Path) -> None:
    """The page as it opens in dark mode and on a phone (390×844), each with the start-up preview step."""
    for name, size, scheme in (("dark", (1400, 1000), "dark"), ("phone", (390, 844), "light")):
        page = browser.new_page(viewport={"width": size[0], "height": size[1]}, color_scheme=scheme)
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=240_000)
        page.wait_for_timeout(2000)
        page.screenshot(path=str(out / f"{name}.png"), full_page=name == "phone")
        page.close()


def walk_views(page, out: Path) -> None:
    """"Walk me through this step" on the TALON step shown (at its first gated level, then the walk down) and
    on a SpecBound step (at its first token), each sentence beside its picture."""
    wanted = {"talon": {3: "walk.png", "The walk down": "walk_down.png"}, "specbound": {2: "walk_specbound.png"}}
    for view, shots in wanted.items():
        if view == "specbound":
            page.get_by_role("tab", name="SpecBound").click()
            page.click("#specbound-step")
            page.wait_for_timeout(2500)
        page.click(f"#{view}-walk")
        page.wait_for_selector(f"#{view}-walk-text .ss-walk-say", timeout=60_000)
        count = int(page.locator(f"#{view}-walk-text .ss-walk-of").text_content())
        for at in range(1, count + 1):
            page.wait_for_function(f"document.querySelector('#{view}-walk-text .ss-walk-at')?.textContent === '{at}'",
                                   timeout=30_000)
            name = page.locator(f"#{view}-walk-text .ss-walk-name").text_content()
            shot = shots.get(at) or shots.get(name)
            if shot:
                page.wait_for_timeout(1200)
                page.locator(f"#{view}-walk-panel").screenshot(path=str(out / shot))
            if at < count:
                page.click(f"#{view}-walk-next")
        page.click(f"#{view}-walk-close")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="docs/screenshots")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with launched_app() as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=240_000)
        page.screenshot(path=str(out / "open.png"))  # what a visitor sees first, before any click
        extra_views(browser, url, out)
        for n in range(1, 5):
            page.click("#talon-step")
            wait_talon_step(page, n)
        page.wait_for_selector("#static-tree .scatterlayer .point", timeout=60_000)
        page.wait_for_timeout(2500)
        page.screenshot(path=str(out / "talon.png"), full_page=True)
        page.locator("#talon-tree").screenshot(path=str(out / "talon_tree.png"))
        walk_views(page, out)
        page.get_by_role("tab", name="SpecBound").click()
        for _ in range(3):  # walk_views stepped it once
            page.click("#specbound-step")
            page.wait_for_timeout(1200)
        page.wait_for_selector("#specbound-heatmap .hm, #specbound-heatmap .heatmaplayer image", timeout=60_000)
        page.wait_for_timeout(2000)
        page.screenshot(path=str(out / "specbound.png"), full_page=True)
        page.get_by_role("tab", name="Compare").click()
        page.get_by_role("button", name="Run all methods").click()
        page.wait_for_function("/done in/.test(document.querySelector('#compare-status')?.textContent || '')",
                               timeout=300_000)  # the final table, not a partial one
        page.wait_for_timeout(1000)
        page.screenshot(path=str(out / "compare.png"), full_page=True)
        page.get_by_role("tab", name="Tune").click()
        page.get_by_role("button", name="Run sweep").click()
        page.wait_for_function("/done in/.test(document.querySelector('#tune-status')?.textContent || '')",
                               timeout=600_000)
        page.wait_for_timeout(1000)
        page.screenshot(path=str(out / "tune.png"), full_page=True)
        browser.close()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()
