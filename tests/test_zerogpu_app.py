"""The app served under ZeroGPU's rules (SPECSCOPE_ZEROGPU_EMULATE=1: every engine call pickled and run in a
freshly forked process, ui/gpu.py): through gradio_client two Steps continue the same text, SpecBound steps,
Compare and Tune run, an export imports; in Chromium the first screen draws and Play plays."""
import re
import time
from pathlib import Path

import pytest
from gradio_client import Client

from ui.examples import example_prompts
from ui.server import launched_app

from tests.handler_helpers import api_args

pytestmark = pytest.mark.slow  # starts the app in a subprocess



@pytest.fixture(scope="module")
def app_url():
    with launched_app(timeout_s=240, env={"SPECSCOPE_ZEROGPU_EMULATE": "1"}) as (url, _):
        yield url


def test_two_steps_continue_the_same_text_and_specbound_steps(app_url):
    client = Client(app_url, verbose=False)
    prompt = example_prompts()[0]
    talon = api_args("talon", prompt, N=16, K=4, mu=0.05, max_new_tokens=12)
    first = client.predict(*talon, api_name="/talon_step")[-1]
    second = client.predict(*talon, api_name="/talon_step")[-1]
    assert (first["index"], second["index"]) == (0, 1)
    assert second["context_len"] == first["context_len"] + first["tau"]  # the run went on from its own text
    _, data = client.predict(api_name="/export_talon")
    assert [s["committed_ids"] for s in data["steps"]] == [first["committed_ids"], second["committed_ids"]]
    sb = client.predict(*api_args("specbound", prompt, max_new_tokens=12), api_name="/specbound_step")[-1]
    assert sb["method"] == "specbound" and sb["tau"] >= 1


def test_compare_and_tune_run_to_the_end(app_url):
    client = Client(app_url, verbose=False)
    table, *_, status = client.predict(example_prompts()[1], 8, 0.0, "embedded", "embedded", "eagle3", "paper",
                                      api_name="/compare")
    assert "done in" in status and [r[0] for r in table["data"]][:2] == ["ar", "chain"]
    assert all(r[5] in ("reference", "✓") for r in table["data"])  # greedy: every method equals AR
    *_, summary, status = client.predict("TALON: μ × N", "0.05", "8, 16", 1, 8, "embedded", "embedded", "eagle3",
                                         api_name="/sweep")
    assert "done in" in status and "Held fixed" in summary
    assert client.predict("embedded", "embedded", "lookup", api_name="/cost_curve_remeasure")  # measured in a worker


def test_the_first_screen_draws_and_play_plays(app_url, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("/usr/bin/chromium is absent (apt-get install chromium)")
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=args)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(app_url, wait_until="domcontentloaded")
        page.wait_for_selector("#talon-tree .scatterlayer .point", timeout=240_000)  # the start-up preview
        title = "document.querySelector('#talon-tree .gtitle')?.textContent || ''"

        def shown() -> int:
            m = re.search(r"step (\d+)", page.evaluate(title))
            return int(m.group(1)) if m and "preview" not in page.evaluate(title) else 0

        page.click("#talon-play")
        deadline = time.time() + 120
        while time.time() < deadline and shown() < 3:
            time.sleep(0.3)
        page.click("#talon-play")
        assert shown() >= 3  # several steps per engine call when calls are remote: it may jump past 3
        browser.close()
