"""Hostile input, handler by handler (no server): markup planted in an exported trace never reaches a view as
markup; a number or name field carrying anything else is refused with one line naming it; files claiming more
than a run could hold are refused at once; Reset wins over a step in flight; long jobs let a Step go first."""
import copy
import json
import threading
import time

import gradio as gr
import pytest

from ui import handlers as h
from ui.view_specs import VIEWS

from tests.handler_helpers import step
from tests.hostile import (PAYLOAD, leaf_paths, markup_in, plant_text, planted_at, specbound_export, talon_export,
                           write)

@pytest.fixture(scope="module")
def exports():
    return {"talon": talon_export(), "specbound": specbound_export(), "auto": talon_export(auto=True)}


def every_view(spec, out: dict) -> list:
    """The import's outputs and every replayed step's, with each redraw option both ways."""
    run, shown = out["run"], [out]
    for i in range(len(run.traces)):
        for opt in spec.options:
            for value in (True, False):
                shown.append(h.replay(spec, run=run, replay=i + 1, **{opt: value}))
    return shown


@pytest.mark.parametrize("kind", ["talon", "specbound", "auto"])
def test_markup_in_every_text_field_is_drawn_as_text(kind, exports, tmp_path):
    spec = VIEWS["specbound" if kind == "specbound" else "talon"]
    data = plant_text(exports[kind])
    out = h.import_run(spec, run=None, path=write(tmp_path, "x.json", data))
    assert out["run"].traces[0].committed_texts[0] == PAYLOAD  # imported as it was written ...
    for shown in every_view(spec, out):  # the raw `trace` goes to a JSON viewer, which shows text (browser test)
        assert markup_in({k: v for k, v in shown.items() if k not in ("run", "trace")}) == []  # never markup
    assert markup_in(h.export_trace(out["run"])[0]) == []  # a path, not a page


@pytest.mark.parametrize("kind", ["talon", "specbound", "auto"])
def test_any_number_or_name_field_carrying_markup_is_refused_naming_it(kind, exports, tmp_path):
    view = "specbound" if kind == "specbound" else "talon"
    data = exports[kind]
    richest = max(range(len(data["steps"])), key=lambda i: len(json.dumps(data["steps"][i])))
    free = {"text", "top_texts", "unchecked_top_texts", "committed_texts"}
    paths = [("steps", richest, *p) for p in leaf_paths(data["steps"][richest])
             if not free & set(p) and p[-2:] != ("auto", "reason")]
    assert len(paths) > 40  # every numeric, boolean and name field of a step, its nodes, levels, exits, ...
    for path in paths:
        with pytest.raises(gr.Error) as err:
            h.import_run(VIEWS[view], run=None, path=write(tmp_path, "x.json", planted_at(data, path)))
        msg = err.value.message
        named = next(k for k in reversed(path) if isinstance(k, str))
        assert named in msg and "\n" not in msg and "<img" not in msg, (path, msg)


@pytest.mark.parametrize("kind", ["talon", "specbound", "auto"])
def test_markup_in_every_text_field_never_reaches_a_walk_stage(kind, exports, tmp_path):
    """"Walk me through this step" on every imported step, every stage, each redraw option both ways."""
    from ui.walk import follow, move_walk, open_walk
    view = "specbound" if kind == "specbound" else "talon"
    spec = VIEWS[view]
    run = h.import_run(spec, run=None, path=write(tmp_path, "x.json", plant_text(exports[kind])))["run"]
    shown = []
    for i in range(len(run.traces)):
        for options in [{}] + [{opt: False} for opt in spec.options]:
            at = open_walk(view, run=run, replay=i + 1, **options)
            shown += [at, follow(view, run=run, trace=run.traces[i].to_dict(), walk_at=at["walk_at"], **options)]
            for _ in range(14):
                at = move_walk(view, 1, run=run, walk_at=at["walk_at"], **options)
                shown.append(at)
    assert len(shown) > 40 and markup_in([{k: v for k, v in s.items() if k != "walk_at"} for s in shown]) == []


def test_all_fields_at_once_and_config_markup(exports, tmp_path):
    data = plant_text(exports["talon"])
    data["config"] = {**data["config"], "N": PAYLOAD, "target": PAYLOAD}
    out = h.import_run(VIEWS["talon"], run=None, path=write(tmp_path, "x.json", data))  # config is only replayed
    assert markup_in({k: v for k, v in out.items() if k not in ("run", "trace")}) == []
    data["steps"][0]["nodes"][0]["depth"] = PAYLOAD
    with pytest.raises(gr.Error, match="depth"):
        h.import_run(VIEWS["talon"], run=None, path=write(tmp_path, "x.json", data))
    data["config"]["seed"] = {"nested": [1]}
    with pytest.raises(gr.Error, match="not a plain value"):
        h.import_run(VIEWS["talon"], run=None, path=write(tmp_path, "x.json", data))


def test_an_error_message_quoting_the_file_is_escaped(exports, tmp_path):
    data = {**exports["talon"], "config": {**exports["talon"]["config"], "method": "<b>x</b>"}}
    with pytest.raises(gr.Error) as err:
        h.import_run(VIEWS["talon"], run=None, path=write(tmp_path, "x.json", data))
    assert "<b>" not in err.value.message


def claims(exports, tmp_path, name: str, change) -> str:
    """A one-step SpecBound export (a few KB) with `change` applied to its step."""
    data = copy.deepcopy(exports["specbound"])
    data["steps"] = data["steps"][:1]
    change(data["steps"][0])
    return write(tmp_path, name, data)


@pytest.mark.parametrize("what,change,named", [
    ("layers", lambda s: s["specbound"].update(num_layers=500_000), "num_layers"),
    ("exit layer", lambda s: s["exits"][0].update(layers=[100_000], raw_conf=[0.1], annealed_conf=[0.1],
                                                  temperature=[1.0], top_ids=[1], top_texts=["a"]), "exits"),
    ("deep node", lambda s: s["nodes"][0].update(depth=10**6), "depth"),
    ("forward parent", lambda s: s["nodes"][0].update(parent=5), "parent"),
    ("many nodes", lambda s: s.update(nodes=[s["nodes"][0]] * 100_000), "nodes"),
    ("huge int", lambda s: s.update(tau=10**30), "tau"),
])
def test_a_small_file_claiming_a_huge_run_is_refused_at_once(what, change, named, exports, tmp_path):
    path = claims(exports, tmp_path, "claim.json", change)
    t0 = time.perf_counter()
    with pytest.raises(gr.Error) as err:
        h.import_run(VIEWS["specbound"], run=None, path=path)
    assert time.perf_counter() - t0 < 1.0 and named in err.value.message, err.value.message


def test_many_minimal_steps_are_refused_and_an_import_keeps_only_traces(exports, tmp_path):
    one = exports["talon"]["steps"][0]
    minimal = {k: one[k] for k in ("index", "method", "context_len")}
    path = write(tmp_path, "many.json", {**exports["talon"], "steps": [minimal] * 20_000, "static_shadows": {}})
    with pytest.raises(gr.Error, match="steps; a run here has at most"):
        h.import_run(VIEWS["talon"], run=None, path=path)
    run = h.import_run(VIEWS["talon"], run=None, path=write(tmp_path, "ok.json", exports["talon"]))["run"]
    assert not hasattr(run, "data")  # the parsed JSON is dropped once its traces are read


def test_a_refused_large_import_keeps_nothing_of_the_file(exports, tmp_path):
    """Issue 46, item 14: ten refused 19.5 MB imports took a server from 1154 to 2160 MB: the visitor's error
    carried the refused exception, its frames and their parsed JSON. Kept as Gradio keeps an error, it now holds
    nothing of the file."""
    import gc
    import tracemalloc
    one = exports["talon"]["steps"][0]
    minimal = {k: one[k] for k in ("index", "method", "context_len")}
    path = write(tmp_path, "big.json", {**exports["talon"], "steps": [minimal] * 150_000, "static_shadows": {}})
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        kept = []
        for _ in range(3):
            try:
                h.import_run(VIEWS["talon"], run=None, path=path)
            except gr.Error as err:  # held, as Gradio holds an event's error
                kept.append(err)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert len(kept) == 3 and all(e.__context__ is None and e.__cause__ is None for e in kept)
    assert held < 2 * 2**20, f"{held / 2**20:.1f} MB still held after three refused imports"


def test_reset_wins_over_a_step_in_flight(monkeypatch):
    import ui.run
    run = step(None)["run"]
    started, release = threading.Event(), threading.Event()
    real = ui.run.run_steps

    def slow(*args, **kwargs):  # the engine call, held until Reset has been pressed (works in any gpu mode)
        started.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(ui.run, "run_steps", slow)
    result = {}
    worker = threading.Thread(target=lambda: result.update(step(run)))
    worker.start()
    assert started.wait(10)
    after_reset = h.reset(VIEWS["talon"], run=run)
    release.set()
    worker.join(20)
    assert after_reset["run"] is None and result["run"] is None  # the step's result was discarded
    monkeypatch.setattr(ui.run, "run_steps", real)
    fresh = step(result["run"])["run"]
    assert fresh is not run and len(fresh.traces) == 1  # the next Step starts over: Reset was not undone


def test_a_long_job_waits_while_a_step_runs():
    from ui.priority import EngineGate
    gate, order = EngineGate(max_wait_s=5), []
    inside, leave = threading.Event(), threading.Event()

    def interactive():
        with gate.interactive():
            inside.set()
            leave.wait(5)
            order.append("step")

    t = threading.Thread(target=interactive)
    t.start()
    inside.wait(5)
    waiter = threading.Thread(target=lambda: (gate.wait_turn(), order.append("long job step")))
    waiter.start()
    time.sleep(0.05)
    leave.set()
    t.join(5)
    waiter.join(5)
    assert order == ["step", "long job step"]
    assert EngineGate(max_wait_s=0.01).wait_turn() is True  # nobody stepping: no wait at all


def test_a_long_interactive_call_holds_a_long_job_back_once_not_at_every_step():
    from ui.priority import EngineGate
    gate, waited = EngineGate(max_wait_s=0.2), set()
    inside, leave = threading.Event(), threading.Event()

    def interactive():
        with gate.interactive():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=interactive)
    t.start()
    inside.wait(5)
    t0 = time.perf_counter()
    assert gate.wait_turn(waited) is False  # the first step waits its most for the running call
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert all(gate.wait_turn(waited) for _ in range(20))  # then the job steps beside it
    rest = time.perf_counter() - t0
    with gate.interactive():  # a new call (a visitor's Step) is waited for again
        assert gate.wait_turn(waited) is False
    leave.set()
    t.join(5)
    assert first >= 0.2 and rest < 0.2 and gate.busy == 0
    assert gate.wait_turn(waited) is True and waited == set()  # the record forgets the calls that ended


def test_one_long_job_per_visitor():
    from ui.jobs import Job, Jobs
    jobs = Jobs()
    jobs.start("abc:compare", Job("Compare", ["x"], 1, 1.0))
    with pytest.raises(ValueError, match="Compare is still running"):
        jobs.start("abc:tune", Job("Tune", ["x"], 1, 1.0))
    jobs.start("other:tune", Job("Tune", ["x"], 1, 1.0))  # another visitor is not held up


def test_a_long_runs_estimate_learns_the_pace_of_the_last_one_here(monkeypatch):
    """Issue 46, item 5: Tune's up-front estimate was 2× low (every cell taken at AR's pace). The next run of a
    tab is estimated at the pace the last finished one of that tab went on this server, and says so."""
    import time as clock
    from ui import jobs as j
    monkeypatch.setattr(j, "JOBS", j.Jobs())
    first = j.Job("Tune", ["a", "b"], 10, 5.0)  # AR pace: 2 parts × 10 tokens × 5 ms = 0.1 s
    assert "the first such run here" in first.status()
    gen = j.long_run(first, "s1:tune", lambda check: iter([1, 2]), lambda r: {})
    list(gen)
    first.started = clock.perf_counter() - 0.25  # as if it took 2.5× its AR-pace estimate
    j.JOBS.learn_pace("tune", first)
    second = j.Job("Tune", ["a", "b"], 10, 5.0)
    status = next(j.long_run(second, "s2:tune", lambda check: iter([]), lambda r: {}))["status"]
    assert second.estimate_s == pytest.approx(0.25, rel=0.05) and "2.5× that, as the last such run here went" in status
    assert j.JOBS.pace("compare") == 1.0  # each tab keeps its own


def test_a_queued_call_cancelled_before_its_turn_is_told_once():
    from ui.jobs import Jobs
    jobs = Jobs()
    jobs.cancel_queued(["e1", "e2"])
    assert jobs.was_cancelled("e1") and not jobs.was_cancelled("e1")  # told once, then forgotten
    assert not jobs.was_cancelled("e3") and not jobs.was_cancelled(None) and jobs.was_cancelled("e2")
    jobs.cancel_queued([f"x{i}" for i in range(2000)])  # calls that never came are not kept for ever
    assert not jobs.was_cancelled("x0") and jobs.was_cancelled("x1999")


def test_a_closed_tab_keeps_its_state_only_the_configured_time(monkeypatch):
    from gradio.state_holder import StateHolder
    import app
    monkeypatch.setenv("SPECSCOPE_STATE_TTL_S", "120")
    demo = app.build_demo()
    holder = StateHolder()
    holder.set_blocks(demo)
    session = holder["tab-1"]
    assert session.STATE_TTL_WHEN_CLOSED == 3600  # Gradio's own: an hour, whatever our TTL
    app.expire_when_closed(demo, gr.Request(session_hash="tab-1"))
    assert session.STATE_TTL_WHEN_CLOSED == 120


def test_a_closed_tab_frees_its_engine_sessions_and_stops_its_long_runs_at_once(monkeypatch):
    """Issue 46, item 14: a closed tab beside an open one kept its engine session (its caches) for the state's
    whole time-to-live. Closing frees the closed tab's sessions and cancels its Compare and Tune, and leaves
    the open tab's alone."""
    from gradio.state_holder import StateHolder
    import app
    from tests.handler_helpers import step
    from ui.jobs import JOBS, Job
    from ui.worker import SESSIONS
    demo = app.build_demo()
    holder = StateHolder()
    holder.set_blocks(demo)
    monkeypatch.setattr(demo, "state_holder", holder, raising=False)
    state_key = next(k for k, b in demo.blocks.items() if isinstance(b, gr.State))
    runs = {}
    for tab in ("closed-tab", "open-tab"):
        runs[tab] = step(None)["run"]
        holder[tab][state_key] = runs[tab]
        assert SESSIONS.get(runs[tab].token) is not None
    job = Job("Tune", ["x"], 1, 1.0)
    JOBS.start("closed-tab:tune", job)
    try:
        app.expire_when_closed(demo, gr.Request(session_hash="closed-tab"))
        assert SESSIONS.get(runs["closed-tab"].token) is None and job.flag.is_set()
        assert SESSIONS.get(runs["open-tab"].token) is not None
    finally:
        JOBS.finish("closed-tab:tune", job)
