"""The walk through one step (viz/walk*.py, ui/walk.py): stages as plain data from the trace alone, a tree that
grows stage by stage with the target's verdicts only after verification, every quoted number equal to its
trace field, SpecBound's per-token stages, the handlers (no engine call) and a shared link's step."""
import html
import re

import gradio as gr
import pytest

from core.trace import StepTrace
from tests.handler_helpers import TALON, sb_step, step
from tests.viz_fixtures import chain_of, specbound_example, talon_example
from tests.walk_helpers import resolve, shown_matches
from ui import walk as w
from viz.tree_fig import STATUS_COLORS
from viz.walk import stages
from viz.walk_parts import ExitPicture
from viz.walk_view import stage_figure, stage_html, walk_view

NUM = re.compile(r'<span class="ss-walk-num" data-field="([^"]*)" data-spec="([^"]*)"[^>]*>(.*?)</span>')
VERDICTS = ("accepted", "rejected", "unreached")


def drawn(fig, metas=("accepted", "rejected", "unreached", "drafted")) -> int:
    return sum(len(t.x) for t in fig.data if t.meta in metas)


def check_numbers(trace: StepTrace, shadow: StepTrace | None) -> int:
    """Every number every stage shows equals the trace field it names; returns how many were checked."""
    step_d, shadow_d = trace.to_dict(), None if shadow is None else shadow.to_dict()
    all_stages, checked = stages(trace, shadow), 0
    for at in range(len(all_stages)):
        for field, spec, shown in NUM.findall(stage_html(all_stages, at, "step")):
            field, spec = html.unescape(field), html.unescape(spec)
            value = resolve(step_d, shadow_d, field)
            assert shown_matches(html.unescape(shown), value, spec), (all_stages[at].name, field, shown, value)
            checked += 1
    return checked


def test_a_talon_step_walks_through_its_stages_and_the_tree_grows():
    t, shadow = talon_example(), talon_example()
    all_stages = stages(t, shadow)
    names = [s.name for s in all_stages]
    assert names == ["The root", "Root Top-K", "Level d = 1", "Budget spent", "Verification", "The walk down",
                     "The bonus token", "The static tree"]
    figs = [stage_figure(t, shadow, s, "x") for s in all_stages]
    counts = [drawn(f) for f in figs[:4]]
    assert counts == [0, 2, 4, 4]  # the root alone, its Top-K, then level 1
    before = figs[: names.index("The walk down")]
    assert all(drawn(f, VERDICTS) == 0 for f in before)  # nothing judged before the verification pass
    walk = figs[names.index("The walk down")]
    assert drawn(walk, ("accepted",)) == 1 and drawn(walk, ("rejected",)) == 2
    assert not any(tr.meta == "bonus" for f in figs[:6] for tr in f.data)
    assert any(tr.meta == "bonus" for tr in figs[6].data)
    assert any(tr.meta == "focus" for tr in figs[1].data)  # the stage's own nodes are ringed
    pruned_shown = [sum(len(tr.x) for tr in f.data if tr.meta == "pruned") for f in figs[:3]]
    assert pruned_shown == [0, 0, 2]  # e (gate) and g (budget) appear with the level that cut them
    assert check_numbers(t, shadow) > 20


def test_the_gate_stage_quotes_the_anchor_the_gate_and_a_cut_candidate():
    gate = stages(talon_example())[2]
    text = html.unescape(re.sub("<[^>]+>", "", stage_html([gate], 0, "step")))
    assert "m_d = 0.54" in text and "μ·m_d = 0.108" in text and "e" in text and "0.06" in text
    assert "budget cuts 1" in text


def test_chain_and_static_steps_walk_too():
    chain = chain_of(3)
    assert [s.name for s in stages(chain)][:4] == ["The root", "Token 1", "Token 2", "Token 3"]
    check_numbers(chain, None)
    static = talon_example()
    static.method, static.tree.policy = "static", "static"
    static.tree.knobs["depth"] = 1
    names = [s.name for s in stages(static, talon_example())]
    assert "The static tree" not in names and names[2] == "Level d = 1"


def test_specbound_walk_follows_each_token_then_verifies():
    t = specbound_example()
    all_stages = stages(t)
    assert [s.name for s in all_stages] == ["The rule", "Token 1", "Token 2", "Token 3", "Why drafting stopped",
                                           "Verification", "The verdict"]
    cells = []
    for s in all_stages[:5]:
        assert isinstance(s.picture, ExitPicture)
        z = stage_figure(t, None, s, "x").data[0].z
        cells.append(sum(v is not None for row in z for v in row))
    assert cells == [0, 2, 5, 9, 9]  # each token's checks appear with its stage
    assert stage_figure(t, None, all_stages[-1], "x").data[0].type == "bar"
    token3 = html.unescape(re.sub("<[^>]+>", "", stage_html(all_stages, 3, "step")))
    assert "no check reached τ_exit by d_max = 4" in token3
    check_numbers(t, None)


@pytest.fixture(scope="module")
def talon_run():
    run = None
    for _ in range(2):
        run = step(run)["run"]
    run.shadow(1, dict(run.config.knobs))
    return run


def test_a_real_steps_numbers_equal_its_trace(talon_run):
    for i, t in enumerate(talon_run.traces):
        assert check_numbers(t, talon_run.shadows.get(i)) > 10
    shadow = talon_run.shadows[1]
    assert check_numbers(shadow, None) > 10  # the static tree walks on its own too


def test_a_real_specbound_steps_numbers_and_unchecked_layers():
    run = None
    for _ in range(2):
        run = sb_step(run)["run"]
    for t in run.traces:
        check_numbers(t, None)
        L = t.specbound.num_layers
        for e in t.exits:
            assert sorted(e.layers + e.unchecked_layers) == list(range(1, L + 1))  # every layer, once
        assert t.display_ms > 0 and t.step_ms > 0


def test_walk_handlers_open_move_close_and_follow(talon_run):
    opened = w.open_walk("talon", run=talon_run, replay=2, show_pruned=True)
    assert opened["walk_at"] == w.WalkAt(1, 0) and "stage <b class=\"ss-walk-at\">1</b>" in opened["walk_text"]
    back = w.move_walk("talon", -1, run=talon_run, walk_at=opened["walk_at"])
    assert back["walk_at"].stage == 0  # no stage before the first
    at = opened["walk_at"]
    for _ in range(30):
        at = w.move_walk("talon", 1, run=talon_run, walk_at=at)["walk_at"]
    assert at.stage == len(stages(talon_run.traces[1], talon_run.shadows[1])) - 1  # nor after the last
    assert w.close_walk()["walk_at"] is None
    followed = w.follow("talon", run=talon_run, trace=talon_run.traces[0].to_dict(), walk_at=at)
    assert "Your run · step 1 of 2" in followed["walk_note"] and followed["walk_at"] == w.WalkAt(0, 0)
    assert "step 2 of 2" in w.follow("talon", run=talon_run, trace={})["walk_note"]  # none named: the latest
    closed = w.follow("talon", run=talon_run, trace=talon_run.traces[1].to_dict(), walk_at=None)
    assert "walk_at" not in closed  # a closed walk stays closed


def test_without_any_step_the_walk_says_so(monkeypatch):
    monkeypatch.setattr(w.PREVIEW, "runs", {})
    out = w.open_walk("talon", run=None, replay=1)
    assert "press Step first" in out["walk_text"] and out["walk_at"] is None
    assert "preview" in w.follow("talon", run=None, trace=None)["walk_note"]


def test_walk_view_clamps_the_stage():
    html_text, fig, at = walk_view(talon_example(), None, 99, "step 1")
    assert at == len(stages(talon_example())) - 1 and fig.layout.title.text


def test_a_link_step_is_read_clamped_and_written():
    from ui.link_step import MAX_STEPS, link_values, read_step, share_link
    assert read_step({}) == (None, "")
    assert read_step({"step": "3"}) == (3, "")
    assert read_step({"step": "999"})[0] == MAX_STEPS and "is used as" in read_step({"step": "999"})[1]
    assert read_step({"step": "x"})[0] is None
    assert link_values("talon", {"N": "12", "step": "3"}) == {"N": 12}
    assert link_values("specbound", {"N": "12"}) == {}  # N is not a SpecBound knob
    assert link_values("talon", {"tab": "specbound", "p": "x"}) == {}  # the prompt goes to the view named
    from ui.share import read_query
    assert read_query({"step": "3"}).notes == []  # share.py leaves `step` to ui/link_step.py


def test_a_shared_link_opens_its_own_settings_at_its_step():
    from ui.link_step import open_view, share_link
    from ui.view_specs import VIEWS
    spec = VIEWS["talon"]
    query = {"tab": "talon", "N": "12", "K": "2", "step": "2", "new": "12"}
    out = open_view(spec, gr.Request(query_params=query), show_pruned=True)
    run = out["run"]
    assert len(run.traces) == 2 and dict(run.config.knobs)["N"] == 12 and run.traces[1].tree.knob("N") == 12
    assert "step 2" in out["tree"].layout.title.text
    link = share_link("talon", {"prompt": run.config.prompt, **TALON, "N": 12, "run": run, "replay": 2})
    assert "step=2" in link and "N=12" in link
    assert "step=" not in share_link("talon", {"prompt": "x", "run": run, "replay": 1})


def test_a_link_whose_settings_cannot_run_shows_the_preview_and_says_why(monkeypatch):
    import threading
    from ui.limits import prompt_char_limit
    from ui.link_step import open_view
    from ui.view_specs import VIEWS
    ready = threading.Event()
    ready.set()  # no start-up preview in tests: do not wait for one
    monkeypatch.setattr(w.PREVIEW, "ready", ready)
    with pytest.warns(UserWarning, match="could not be run"):
        out = open_view(VIEWS["talon"], gr.Request(query_params={"p": "x" * (prompt_char_limit() + 1)}))
    assert "run" not in out and "tree" in out  # the start-up preview, drawn as without a link
