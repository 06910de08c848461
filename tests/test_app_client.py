"""gradio_client against a launched app: the step endpoint returns a trace, export returns the run, and
two clients stepping different prompts at the same time never see each other's state."""
import threading

import pytest
from gradio_client import Client

from ui.server import launched_app
from ui.examples import example_prompts

pytestmark = pytest.mark.slow  # starts the app in a subprocess

KNOBS = (16, 4, 0.05, 1, 1.0, 0.0, 0, 10, "embedded", "embedded", True)  # N K μ k T_shape T seed max_new target draft pruned


@pytest.fixture(scope="module")
def app_url():
    with launched_app() as (url, _):
        yield url


def talon_step(client: Client, prompt: str):
    return client.predict(prompt, *KNOBS, api_name="/talon_step")


def test_step_endpoint_returns_a_trace(app_url):
    client = Client(app_url, verbose=False)
    out = talon_step(client, example_prompts()[0])
    trace = out[-1]
    assert trace["method"] == "talon" and trace["index"] == 0
    assert trace["tau"] >= 1 and trace["nodes"] and len(trace["choices"]) >= 1
    assert talon_step(client, example_prompts()[0])[-1]["index"] == 1  # the client's session keeps its run


def test_two_clients_keep_separate_state(app_url):
    prompts = example_prompts()[1], example_prompts()[3]
    results, errors = {}, []

    def work(i: int) -> None:
        try:
            client = Client(app_url, verbose=False)
            contexts = [talon_step(client, prompts[i])[-1]["context_len"] for _ in range(3)]
            _, data = client.predict(api_name="/export_talon")
            results[i] = (contexts, data)
        except Exception as exc:  # reported below, with the thread's own error
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not errors, errors
    for i in range(2):
        contexts, data = results[i]
        assert data["config"]["prompt"] == prompts[i]
        assert len(data["steps"]) == 3
        assert contexts == sorted(contexts) and len(set(contexts)) == 3  # one run, stepped only by this client
        assert data["prompt_text"].strip().endswith(prompts[i].strip()[-10:])


def test_link_and_import_endpoints(app_url):
    from gradio_client import handle_file
    client = Client(app_url, verbose=False)
    link = client.predict("def f(x):", *KNOBS[:8], "lookup", False, 0.4, api_name="/talon_link")
    assert link.startswith("?tab=talon&p=def%20f%28x%29%3A") and "N=16" in link and "drafter=lookup" in link
    assert "lam=0.4" in link  # λ_lookup travels with the link
    for _ in range(2):
        talon_step(client, example_prompts()[0])
    path, data = client.predict(api_name="/export_talon")
    out = client.predict(handle_file(path), True, api_name="/talon_import")
    trace = next(o for o in out if isinstance(o, dict) and "index" in o)
    assert trace == data["steps"][0]  # the imported trace, replayed from step 1
    assert "imported trace" in str(out[0])


def test_deep_links_are_refused_and_stripped(app_url):
    import urllib.error
    import urllib.request
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(app_url + "gradio_api/deep_link?session_hash=abc", timeout=10)
    assert err.value.code == 404
    with urllib.request.urlopen(app_url + "?deep_link=abc123&tab=specbound", timeout=10) as r:
        assert r.status == 200 and r.url.endswith("/?tab=specbound")  # redirected without it, the rest kept


def post_multipart(url: str, size: int) -> int:
    """POST a `size`-byte file to Gradio's upload route in chunks; the status the server answered with (it may
    answer before the body is sent, then close: the answer is still read)."""
    import http.client
    from urllib.parse import urlsplit
    u, boundary = urlsplit(url), "x" * 24
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.json\"\r\n"
            f"Content-Type: application/json\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.putrequest("POST", u.path)
    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    conn.putheader("Content-Length", str(len(head) + size + len(tail)))
    conn.endheaders()
    try:
        conn.send(head)
        for _ in range(size // 2**20):
            conn.send(b" " * 2**20)
        conn.send(tail)
    except OSError:
        pass  # the server refused the rest of the body
    return conn.getresponse().status


def test_an_oversized_upload_is_refused_before_it_is_stored(app_url):
    from pathlib import Path
    from gradio.utils import get_upload_folder

    def stored() -> int:
        return sum(f.stat().st_size for f in Path(get_upload_folder()).rglob("*") if f.is_file())

    before = stored()
    assert post_multipart(app_url + "gradio_api/upload", 100 * 2**20) == 413
    assert stored() - before < 25 * 2**20  # nothing near 100 MB was kept


def test_an_import_with_markup_returns_none_through_the_api(app_url, tmp_path):
    from gradio_client import handle_file
    from tests.hostile import markup_in, plant_text, talon_export, write
    client = Client(app_url, verbose=False)
    path = write(tmp_path, "x.json", plant_text(talon_export(steps=2)))
    out = client.predict(handle_file(path), True, api_name="/talon_import")
    html = [o for o in out if isinstance(o, str)]
    assert html and markup_in(html) == []


def test_compare_tune_and_cost_endpoints_keep_their_positional_order(app_url):
    """/compare and /sweep are wired by name on the page, and still take their inputs in the old order."""
    client = Client(app_url, verbose=False)
    table, *_, status = client.predict(example_prompts()[1], 8, 0.0, "embedded", "embedded", "eagle3", "embedded",
                                      "auto", api_name="/compare")
    rows = [r[0] for r in table["data"]]
    assert "done in" in status and rows == ["ar", "chain", "static", "talon", "talon@self", "specbound"]
    *_, summary, status = client.predict("TALON: μ × N", "0.1", "8", 1, 8, "embedded", "embedded", "eagle3", "auto",
                                         "K = 3, T_shape = 0.7", api_name="/sweep")
    assert "done in" in status and "K = 3, k = 1, T_shape = 0.7" in summary and "too few tokens to rank" in summary
    *_, status = client.predict("TALON: μ × N", "0.1", "8", 1, 8, "embedded", "embedded", "eagle3",
                                api_name="/sweep")  # an older caller: the fixed knobs are the sweep's own
    assert "done in" in status
    kept = client.predict("embedded", "embedded", "lookup", api_name="/cost_curve")
    again = client.predict("embedded", "embedded", "lookup", api_name="/cost_curve_remeasure")
    assert kept and again


def test_a_queued_tune_cancelled_through_the_api_never_runs(app_url):
    """Issue 46, item 14: a Tune waiting in the queue (behind another visitor's) and cancelled through the
    API used to run anyway when its turn came; now it ends at once, saying nothing ran."""
    import time
    from gradio_client.utils import Status
    first, second = Client(app_url, verbose=False), Client(app_url, verbose=False)
    long_job = first.submit("TALON: μ × N", "0.02,0.05,0.1,0.2,0.4", "8,16,32,64", 3, 64, "embedded", "embedded",
                            "eagle3", "auto", "K = 3, T_shape = 0.7", api_name="/sweep")  # a minute or more
    deadline = time.time() + 60
    while long_job.status().code not in (Status.PROCESSING, Status.ITERATING) and time.time() < deadline:
        time.sleep(0.05)  # the long one holds the queue's one long-job slot before the second is sent
    queued = second.submit("TALON: μ × N", "0.1", "8", 1, 8, "embedded", "embedded", "eagle3", "auto",
                           "K = 3, T_shape = 0.7", api_name="/sweep")
    deadline, seen = time.time() + 60, None
    while seen != Status.IN_QUEUE and time.time() < deadline:
        seen = queued.status().code
        time.sleep(0.05)
    assert seen == Status.IN_QUEUE  # behind the first visitor's Tune (one long job at a time)
    said = second.predict(api_name="/sweep_cancel")
    assert "waiting in the queue" in said
    first.predict(api_name="/sweep_cancel")  # the long one stops at its next engine step
    *_, status = queued.result(timeout=120)
    assert "cancelled while it waited in the queue; nothing ran" in status
    long_job.result(timeout=120)
