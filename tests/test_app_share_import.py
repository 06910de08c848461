"""Handlers called directly: the share link's round trip and its messages, and Import of an exported trace
(replayed as exported; a bad file is one line and the session is kept)."""
import json

import gradio as gr
import pytest

from ui import handlers as h
from ui.examples import default_prompt
from ui.models import DEFAULT_DRAFTER
from ui.view_specs import VIEWS

from tests.handler_helpers import n_nodes, sb_step, step


def link_params(url: str) -> dict:
    from urllib.parse import parse_qsl, urlsplit
    return dict(parse_qsl(urlsplit(url).query))


def opened(fields: list[str], updates) -> list:
    """What the page shows after a link's load: the link's values, defaults where it left a field alone."""
    from ui.share import KNOBS
    defaults = {"prompt": default_prompt(), "drafter": DEFAULT_DRAFTER, "auto": False, "exit_layers": "all",
                **{n: k.default for n, k in KNOBS.items()}}
    return [defaults[f] if isinstance(u, dict) else u for f, u in zip(fields, updates)]


def test_share_link_round_trip_fills_the_same_knobs():
    from ui.share import FIELDS, apply_link, share_query
    n_talon = len(FIELDS["talon"])
    talon = ["a prompt & more\nsecond line", 16, 4, 0.05, 2, 0.5, 0.7, 3, 24, "lookup", True, 0.6]  # ..., λ_lookup
    query = share_query("talon", dict(zip(FIELDS["talon"], talon)))
    assert query.startswith("?tab=talon&p=") and "&K=4&" in query and "seed=3" in query and "N=16" in query and "T=0.5" in query
    assert "lam=0.6" in query
    assert "max_new" not in query and "new=24" in query  # short names
    out = apply_link(gr.Request(query_params=link_params("http://host/" + query)))
    assert out[0].selected == "talon" and "Opened a shared link" in out[1].value
    assert list(out[2:2 + n_talon]) == talon
    assert all(isinstance(v, dict) for v in out[2 + n_talon:])  # SpecBound's fields left alone
    sb = ["import os", 2.0, 0.75, 8, 3, 2, 1024, 0.0, 0, 64, "2,4"]  # ..., ℓ_min, V_exit, sampling, exit layers
    query = share_query("specbound", dict(zip(FIELDS["specbound"], sb)))
    assert "temp" not in query and "seed" not in query  # values at their defaults stay out of the link
    out = apply_link(gr.Request(query_params=link_params(query)))
    assert out[0].selected == "specbound" and opened(FIELDS["specbound"], out[2 + n_talon:]) == sb
    defaults = opened(FIELDS["specbound"], [{}] * len(FIELDS["specbound"]))
    assert share_query("specbound", dict(zip(FIELDS["specbound"], defaults))) == "?tab=specbound"


def test_share_link_clamps_and_ignores_with_a_visible_message():
    from ui.share import apply_link
    out = apply_link(gr.Request(query_params={"N": "500", "mu": "abc", "zoom": "2", "tab": "nope",
                                              "drafter": "oracle", "__theme": "dark"}))
    msg = out[1].value
    assert "N (node budget) must be between 1 and 128: 500 is used as 128" in msg
    assert "not a number" in msg and "unknown parameter &#x27;zoom&#x27;" in msg and "tab=" in msg
    assert "drafter=" in msg and "__theme" not in msg
    assert out[0] == gr.skip() or isinstance(out[0], dict)  # no valid tab: stays where it is
    assert out[3] == 128  # N, clamped
    lam = apply_link(gr.Request(query_params={"tab": "talon", "lam": "1.5"}))
    assert "must be between 0 and 1: 1.5 is used as 1" in lam[1].value and 1.0 in lam[2:]
    nothing = apply_link(gr.Request(query_params={}))
    assert all(isinstance(v, dict) for v in nothing[1:])  # no message, nothing changed


def test_import_of_an_exported_trace_replays_the_same_steps():
    run = None
    for _ in range(3):
        run = step(run)["run"]
    talon = VIEWS["talon"]
    h.extras(talon, run=run)  # a static shadow for the latest step travels in the export too
    path, data = h.export_trace(run)
    out = h.import_run(talon, run=run, path=path)
    imported = out["run"]
    assert imported is not run and imported.live is run and "imported trace" in out["tree"].layout.title.text
    assert "Imported trace" in out["stats"] and out["timer"].active is False  # labelled, and Play stops
    for i in range(3):
        shown = h.replay(talon, run=imported, replay=i + 1)
        assert json.loads(json.dumps(shown["trace"])) == data["steps"][i]  # the same step, as exported
        assert n_nodes(shown["tree"]) == len(run.traces[i].nodes)
    assert h.replay(talon, run=imported, replay=3)["static"].layout.title.text.startswith("STATIC")  # its shadow
    assert h.export_trace(imported)[1] == data  # re-exported unchanged
    with pytest.raises(gr.Error, match="timed elsewhere"):
        h.remeasure(imported)
    n = len(run.traces)
    back = step(imported, max_new_tokens=24)["run"]  # other settings: a fresh run, no longer the imported one
    assert back is not imported and back is not run and len(back.traces) == 1
    assert step(h.import_run(talon, run=run, path=path)["run"])["run"] is run  # same settings: the live run goes on
    assert len(run.traces) == n + (0 if run.done else 1)
    sb_run = sb_step(None)["run"]
    sb = h.import_run(VIEWS["specbound"], run=None, path=h.export_trace(sb_run)[0])
    assert sb["run"].live is None and "imported trace" in sb["heatmap"].layout.title.text


def test_a_small_budgets_static_shadow_imports():
    """N = 2 keeps 2 of the static tree's D + 1 levels of candidates: its levels are its forwards, not its nodes
    (auto chose N ≤ 3 on a busy CI machine, and the export of such a step was refused on import)."""
    run = None
    for _ in range(2):
        run = step(run, N=2)["run"]
    talon = VIEWS["talon"]
    h.extras(talon, run=run)
    shadow = run.shadows[len(run.traces) - 1]
    assert len(shadow.nodes) == 2 and len(shadow.levels) > len(shadow.nodes) + 1
    imported = h.import_run(talon, run=None, path=h.export_trace(run)[0])["run"]
    assert imported.shadows[len(run.traces) - 1].to_dict() == shadow.to_dict()


def test_import_of_a_bad_file_says_why_in_one_line(tmp_path, monkeypatch):
    run = step(None)["run"]
    good = json.loads(open(h.export_trace(run)[0], encoding="utf-8").read())
    cases = {
        "notjson.json": ("{not json", "not JSON"),
        "binary.json": (b"\xff\xfe\x00garbage", "not text"),
        "list.json": ("[1, 2, 3]", "needs a config and a list of steps"),
        "other.json": (json.dumps({**good, "config": {**good["config"], "method": "specbound"}}),
                       "'specbound' trace, not a talon one; import it in the SpecBound tab"),
        "nosteps.json": (json.dumps({**good, "steps": []}), "no steps"),
        "shape.json": (json.dumps({**good, "steps": [{"index": 0}]}), "step 1 lacks"),
        "types.json": (json.dumps({**good, "steps": [{**good["steps"][0], "nodes": "x"}]}), "not a list"),
    }
    for name, (content, message) in cases.items():
        p = tmp_path / name
        (p.write_bytes if isinstance(content, bytes) else p.write_text)(content)
        with pytest.raises(gr.Error) as err:
            h.import_run(VIEWS["talon"], run=run, path=str(p))
        assert message in err.value.message and "\n" not in err.value.message, (name, err.value.message)
        assert "Traceback" not in err.value.message
    monkeypatch.setenv("SPECSCOPE_IMPORT_MAX_MB", "0.001")
    with pytest.raises(gr.Error, match="MB; an exported trace is at most"):
        h.import_run(VIEWS["talon"], run=run, path=h.export_trace(run)[0])
    assert step(run)["run"] is run and len(run.traces) == 2  # the session was never lost
