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
from tests.walk_helpers import random_talon_trace, resolve, shown_matches
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
    before = figs[: names.index("Verification")]
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
    assert "so 3 pass it" in text and "room for 2 and cuts the other 1" in text


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


@pytest.mark.parametrize("knobs", [{}, dict(tau_exit=0.2, alpha=0.0, d_max=12, w_max=4)], ids=["d_max", "w_max"])
def test_a_real_specbound_steps_numbers_and_unchecked_layers(knobs):
    run = None
    for _ in range(2):
        run = sb_step(run, **knobs)["run"]
    for t in run.traces:
        check_numbers(t, None)
        L = t.specbound.num_layers
        verify = stage_figure(t, None, next(s for s in stages(t) if s.name == "Verification"), "x")
        seg = next(tr for tr in verify.data if tr.meta == "verify")  # the one pass, drawn from the trace
        assert min(seg.base) == t.specbound.verify_from_layer and all(b + y == L for b, y in zip(seg.base, seg.y))
        for e in t.exits:
            assert sorted(e.layers + e.unchecked_layers) == list(range(1, L + 1))  # every layer, once
        assert t.display_ms > 0 and t.step_ms > 0


def test_after_a_real_talon_step_the_visible_text_quotes_its_numbers(talon_run):
    """Issue 46's must-show: after a TALON Step, at >= 80% of the walk's stages (here: every one) the text seen
    without a click quotes a number of this step, and no entity shows literally."""
    for i, t in enumerate(talon_run.traces):
        all_stages = stages(t, talon_run.shadows.get(i))
        seen = []
        for at in range(len(all_stages)):
            page = stage_html(all_stages, at, "step")
            visible_part = re.sub(r"<details.*?</details>", "", page, flags=re.S)
            said = visible_part.split('class="ss-walk-say"', 1)[1].split("</p>", 1)[0]
            seen.append("ss-walk-num" in said)
            assert not re.search(r"&amp;(#\d+|[a-z]+);", page)  # an entity escaped twice would show literally
        assert all(seen), [s.name for s, ok in zip(all_stages, seen) if not ok]


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
    assert "preview" not in w.follow("talon", run=None, trace=None)["walk_note"]  # none to announce (issue 46)


def test_walk_view_clamps_the_stage():
    html_text, fig, at = walk_view(talon_example(), None, 99, "step 1")
    assert at == len(stages(talon_example())) - 1 and fig.layout.title.text


def test_a_link_step_is_read_clamped_and_written():
    from ui.open_link import MAX_STEPS, link_values, read_step, share_link
    assert read_step({}) == (None, "")
    assert read_step({"step": "3"}) == (3, "")
    assert read_step({"step": "999"})[0] == MAX_STEPS and "is used as" in read_step({"step": "999"})[1]
    assert read_step({"step": "x"})[0] is None
    assert link_values("talon", {"N": "12", "step": "3"}) == {"N": 12}
    assert link_values("specbound", {"N": "12"}) == {}  # N is not a SpecBound knob
    assert link_values("talon", {"tab": "specbound", "p": "x"}) == {}  # the prompt goes to the view named
    from ui.share import read_query
    assert read_query({"step": "3"}).notes == []  # share.py leaves `step` to ui/open_link.py


def test_a_shared_link_opens_its_own_settings_at_its_step():
    from ui.open_link import open_view, share_link
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
    from ui.open_link import open_view
    from ui.view_specs import VIEWS
    ready = threading.Event()
    ready.set()  # no start-up preview in tests: do not wait for one
    monkeypatch.setattr(w.PREVIEW, "ready", ready)
    with pytest.warns(UserWarning, match="could not be run"):
        out = open_view(VIEWS["talon"], gr.Request(query_params={"p": "x" * (prompt_char_limit() + 1)}))
    assert "run" not in out and "tree" in out  # the start-up preview, drawn as without a link


def plain(stage) -> str:
    """A stage's details as the page's text reads."""
    return html.unescape(re.sub("<[^>]+>", "", stage_html([stage], 0, "step")))


def numbers(text: str, pattern: str) -> list[int] | None:
    m = re.search(pattern, text)
    return None if m is None else [int(g) for g in m.groups()]


@pytest.mark.parametrize("seed", range(40))
def test_every_level_stage_adds_up_and_matches_its_picture(seed):
    """Issue 34, item 1: a gated level said the budget cut 62 "more" while 96 − 74 = 22 passed the gate. On
    random traces of the real policy, each level stage's counts add up (scored − gate cut = passed; the budget's
    cut of those + kept = passed; never-scored + that cut = the budget's cut in all), the number kept is the
    number of nodes its picture draws at that depth, and every number equals the trace field it names."""
    t = random_talon_trace(seed)
    check_numbers(t, None)
    for stage, lv in zip(stages(t)[1:], t.levels):
        text = plain(stage)
        if stage.name.startswith("Levels"):  # the deep tail in one stage, summed: passed = kept + the scored cut
            kept, scored, gate, budget = numbers(text, r"keep (\d+) nodes in all of (\d+) scored; the gate cuts "
                                                       r"(\d+), the budget (\d+)")
            assert kept <= scored - gate <= kept + budget, (seed, text)
            break
        if not stage.name.startswith(("Level", "Root", "d =")):
            break
        fig = stage_figure(t, None, stage, "x")
        if not any(tr.meta == "more" for tr in fig.data):  # a wide tree folds children into "+k more"
            assert drawn(fig, ("drafted",)) == sum(1 for n in t.nodes if n.depth <= lv.depth), (seed, stage.name)
        if lv.gate is None:  # Top-K
            if lv.cut_by_topk:
                cut, scored, kept = numbers(text, r"Top-K cut (\d+) \((\d+) − (\d+)\)")
                assert cut == scored - kept and kept == sum(1 for n in t.nodes if n.depth == lv.depth)
            else:  # issue 46, item 6: never "Top-K cut 0 (10 − 10)", which reads as if Top-K cut nothing
                assert "Top-K cut" not in text and "Top-K already chose these from the whole draft vocabulary" in text
            continue
        gate_cut, scored = numbers(text, r"The gate cuts (\d+) of the (\d+)")
        (passed,) = numbers(text, r", so (\d+) pass it")
        assert scored - gate_cut == passed, (seed, text)
        room = numbers(text, r"has room for (\d+) and cuts the other (\d+)")
        (kept,) = numbers(text, r"; (\d+) are kept")
        assert kept == sum(1 for n in t.nodes if n.depth == lv.depth)
        if room is None:
            assert kept == passed
        else:
            assert room[0] == kept and room[0] + room[1] == passed
        never = numbers(text, r"(\d+) more children would pass the gate but were never scored.*?budget cuts (\d+) in all")
        budget = (room[1] if room else 0) + (never[0] if never else 0)
        assert budget == lv.cut_by_budget and (never is None or never[1] == lv.cut_by_budget), (seed, text)


def test_random_traces_include_the_cases_that_used_to_disagree():
    """The sweep above covers gates that cut, budgets that cut passed candidates, and children never scored."""
    seen = set()
    for seed in range(40):
        for lv in random_talon_trace(seed).levels:
            if lv.gate is not None:
                over = lv.candidates - lv.cut_by_gate - lv.kept
                seen |= {"gate"} if lv.cut_by_gate else set()
                seen |= {"budget"} if over else set()
                seen |= {"never scored"} if lv.cut_by_budget > over else set()
    assert seen == {"gate", "budget", "never scored"}


def test_each_stage_opens_with_this_steps_numbers_then_its_plain_lead():
    """Issue 46, item 1 (after issue 34's plain lead): the first sentence a visitor sees quotes this step's own
    numbers; the plain lead follows unfolded; the rest of the details fold. On every stage of these examples."""
    for t, shadow in ((talon_example(), talon_example()), (specbound_example(), None), (chain_of(3), None)):
        all_stages = stages(t, shadow)
        for at, s in enumerate(all_stages):
            assert s.lead and s.lead.endswith(".") and s.lead.count(". ") == 0, s.name
            page = stage_html(all_stages, at, "step")
            said = page.split('class="ss-walk-say"', 1)[1].split("</p>", 1)[0]
            first = re.split(r"[.!?](?:\s|$)", re.sub(r"<[^>]+>", "", said).strip())
            assert "ss-walk-num" in said and len([x for x in first if x.strip()]) == 1, (s.name, said)
            assert page.index("ss-walk-say") < page.index("ss-walk-lead") and html.escape(s.lead) in page
            assert "<details open" not in page  # the rest folded until asked for


def test_verification_draws_what_verification_does():
    """Issue 34, item 2: TALON's verification picture is no longer the tree as grown: the verdicts, the
    accepted path lit and the rejected node's q vs p; SpecBound's adds the layers the one pass computed."""
    t = talon_example()
    all_stages = stages(t, None)
    names = [s.name for s in all_stages]
    grown = stage_figure(t, None, all_stages[names.index("Budget spent")], "x")
    verify = stage_figure(t, None, all_stages[names.index("Verification")], "x")
    assert drawn(grown, VERDICTS) == 0 and drawn(verify, ("accepted",)) == 1 and drawn(verify, ("rejected",)) == 2
    notes = [a.text for a in verify.layout.annotations if a.name == "p vs q"]
    assert notes == ["d: draft q = 0.90 vs target p = 0.10"]  # the draft's favourite under 'a', which the walk stops at
    assert any(tr.line.color == STATUS_COLORS["accepted"] and tr.mode == "lines" for tr in verify.data)  # the path lit
    sb = specbound_example()
    sb_stages = stages(sb)
    bars = stage_figure(sb, None, next(s for s in sb_stages if s.name == "Verification"), "x")
    seg = next(tr for tr in bars.data if tr.meta == "verify")
    L = sb.specbound.num_layers
    assert list(seg.base) == [2, 2, 2] and [b + y for b, y in zip(seg.base, seg.y)] == [L] * 3  # exact depth → L
    verdict = stage_figure(sb, None, sb_stages[-1], "x")
    assert any("vs target p = 0.10" in a.text for a in verdict.layout.annotations)


def test_the_static_trees_levels_and_its_delta_agree():
    """Issue 34, item 4: a static tree grows D + 1 levels (δ = D + 1) but its final rerank may keep fewer: the
    walk says how many levels were grown and how deep the kept tree goes, so '8 levels, δ = 9' is explained."""
    from core.trace import LevelTrace
    t = talon_example()
    t.method, t.tree.policy = "static", "static"
    t.tree.knobs["depth"] = 2
    t.levels = t.levels + [LevelTrace(2, 2, 4, 2, anchor=0.1, cut_by_topk=2)]  # a third level, none kept
    t.delta = 3
    grown = plain(next(s for s in stages(t) if s.name == "Budget spent"))
    assert "δ = 3 draft forwards, one per level grown (3 levels, d = 0…2)" in grown
    assert "kept nodes down to d = 1 only, so the picture shows 2 level(s)" in grown
    static = plain(next(s for s in stages(talon_example(), t) if s.name == "The static tree"))
    assert "3 levels, δ = 3" in static and "down to d = 1 (the deeper levels kept none)" in static


def test_the_specbound_walk_counts_exit_checks_in_what_the_step_computed():
    """Issue 46, item 4: 'saved' left the exit checks out (46% claimed where the step cost 98% of plain
    decoding); now the checks are counted in layers, and a step that cost more says so instead of a negative saving."""
    t = specbound_example()
    sb = t.specbound
    sb.layers_computed, sb.layers_full_equivalent, sb.head_evals, sb.head_cost_layers = 13, 24, 7, 1.5
    sb.layers_equivalent, sb.compute_saved = 23.5, 1 - 23.5 / 24
    text = plain(next(s for s in stages(t) if s.name == "Verification"))
    assert "7 exit checks of 1.5 layer each: 23.5 layer equivalents" in text and "2% less" in text
    sb.head_cost_layers, sb.layers_equivalent, sb.compute_saved = 2.0, 27.0, 1 - 27 / 24
    text = plain(next(s for s in stages(t) if s.name == "Verification"))
    assert "computed more than plain decoding" in text and "-" not in text.split("layer equivalents")[1][:40]
    assert check_numbers(t, None) > 5
