"""The long tabs' handlers called directly (no server): Compare (every method to the end, with ranges and error
bars, Cancel keeping what finished), Tune (heatmaps, each cell's range, the fixed knobs reaching the runs,
the best static tree and chain as server flags, Cancel) and the cost curve (figure, measuring it again)."""
import re
from html import unescape

import gradio as gr
import pytest

from ui.compare_tab import cancel_compare, run_compare
from ui.tune_tab import cancel_sweep, cost_curve, run_sweep
from viz.cost_fig import cost_curve_figure

from tests.handler_helpers import PROMPT, step


def test_compare_can_run_the_trees_at_the_embedded_preset():
    from ui.compare_tab import compare_knobs
    assert compare_knobs("embedded")["K"] == 2 and compare_knobs("paper")["N"] == 60
    last = list(run_compare(PROMPT, 8, 0.0, trees="embedded"))[-1]
    assert "done in" in last["status"] and all(r[5] == "✓" for r in last["table"][1:])  # lossless at that shape too
    with pytest.raises(gr.Error, match="unknown tree settings"):
        list(run_compare(PROMPT, 8, 0.0, trees="huge"))


def test_compare_runs_every_method_with_a_range_and_error_bars():
    updates = list(run_compare(PROMPT, 8, 0.0))
    assert set(updates[0]) == {"status"}  # the estimate comes first, alone
    assert "estimated" in updates[0]["status"] and "ms per token" in updates[0]["status"]
    assert "1 of 13 done · running chain (round 1)" in updates[1]["status"] and "left" in updates[1]["status"]
    assert "running specbound (round 2)" in updates[7]["status"]  # issue 46, item 5: the second round reversed
    rows, fig, status = (updates[-1][k] for k in ("table", "plot", "status"))
    assert "done in" in status
    assert [r[0] for r in rows] == ["ar", "chain", "static", "talon", "talon@self", "specbound"]
    assert rows[0][4] == "1.00×" and rows[0][5] == "reference"  # AR over itself, by construction
    assert all(r[5] == "✓" for r in rows[1:])  # every method was built, ran and equals AR
    ranges = [re.fullmatch(r"(\d+\.\d\d)× \((\d+\.\d\d)–(\d+\.\d\d)\)", r[4]) for r in rows[1:]]
    assert all(ranges)
    bars = fig.data[1]
    assert list(bars.x) == [r[0] for r in rows] and bars.error_y.type == "data"  # an error bar per method
    for m, up, down, value in zip(ranges, bars.error_y.array[1:], bars.error_y.arrayminus[1:], bars.y[1:]):
        assert value + up == pytest.approx(float(m[3]), abs=0.006) and value - down == pytest.approx(float(m[2]), abs=0.006)


def test_compare_says_what_its_ranges_support_and_two_runs_agree_with_it():
    """Issue 46, item 5: two identical Compare runs (chain 1.46× then 2.99×) read as findings. The page now
    says which methods beat AR over their whole range, which it cannot tell from AR, and ranks two methods only
    where their ranges are apart; run twice, every ordering either run claims is one whose ranges are apart in
    that run, and a method whose two ranges do not overlap was never ranked against AR by both runs alike."""
    from ui.compare import CompareRow, conclusions
    pages, tables = [], []
    for _ in range(2):
        last = list(run_compare(PROMPT, 16, 0.0))[-1]
        pages.append(unescape(last["status"]))
        tables.append({r[0]: [float(x) for x in re.findall(r"(\d+\.\d\d)", r[4])] for r in last["table"][1:]})
    for page, table in zip(pages, tables):
        assert "What this run can conclude" in page and "run Compare again" in page
        for a, b in re.findall(r"(\S+) > (\S+?)[;.]", page.split("do not overlap:")[1].split("</li>")[0]
                               if "do not overlap:" in page else ""):
            assert table[a][1] > table[b][2], (a, b, table)  # a's low end above b's high end
    for method in tables[0]:
        (_, lo1, hi1), (_, lo2, hi2) = tables[0][method], tables[1][method]
        if lo1 > hi2 or lo2 > hi1:  # the runs disagree beyond their ranges: not both sure of the same side of AR
            sides = [("faster" if lo > 1 else "slower" if hi < 1 else "level") for lo, hi in ((lo1, hi1), (lo2, hi2))]
            assert sides[0] != sides[1] or sides[0] == "level", (method, tables)
    rows = [CompareRow("ar", "", 1, 0, 10, 1.0, "reference"),
            CompareRow("chain", "", 2, 1, 20, 2.0, "✓", lo=1.6, hi=2.4),
            CompareRow("talon", "", 2, 1, 15, 1.5, "✓", lo=1.1, hi=1.7),
            CompareRow("specbound", "", 1, 1, 9, 0.9, "✓", lo=0.7, hi=1.05)]
    said = " ".join(conclusions(rows))
    assert "whole range: chain, talon." in said and "(the range spans 1.00×): specbound" in said
    assert "talon > specbound" in said and "chain and talon" in said and "chain > talon" not in said
    close = [CompareRow("specbound", "", 1, 1, 9, 1.2, "✓", lo=1.114, hi=1.3),  # shown 1.11–1.30
             CompareRow("static", "", 2, 1, 9, 0.9, "✓", lo=0.66, hi=1.106),  # shown 0.66–1.11
             CompareRow("talon", "", 2, 1, 9, 0.8, "✓", lo=0.68, hi=0.996)]  # shown 0.68–1.00
    said = " ".join(conclusions(close))  # no claim that the table's own two-decimal ends cannot carry (a CI run)
    assert "specbound and static" in said and "specbound > static" not in said
    assert "spans 1.00×): static, talon." in said and "Slower" not in said


def test_cancel_stops_compare_keeps_what_finished_and_the_page_usable():
    me, other = gr.Request(session_hash="me"), gr.Request(session_hash="other")
    running = run_compare(PROMPT, 8, 0.0, request=me)
    next(running)  # the estimate
    rows = next(running)["table"]  # AR before the methods has finished
    assert [r[0] for r in rows] == ["ar"]
    assert "Nothing to cancel" in cancel_compare(other)  # another session's Cancel does not touch this run
    assert "Nothing to cancel" in cancel_sweep(me)  # nor this session's Cancel on the Tune tab
    assert "Cancelled after 1 of 13" in cancel_compare(me)
    rest = list(running)
    assert len(rest) == 1 and rest[0]["table"] == rows and "Cancelled after 1 of 13" in rest[0]["status"]  # kept
    assert "Nothing to cancel" in cancel_compare(me)
    assert list(run_compare(PROMPT, 8, 0.0, request=me))[-1]["table"][-1][0] == "specbound"  # usable again
    assert step(None)["run"].traces  # and so is stepping


def test_tune_sweep_heatmaps():
    updates = list(run_sweep("TALON: μ × N", "0.05, 0.2", "8", 1, 8))
    assert "Tune: 2 cells" in updates[0]["status"] and len(updates) == 1 + 4 + 1
    last = updates[-1]
    assert len(last["mat"].data[0].z) == 1 and len(last["mat"].data[0].z[0]) == 2 and "done in" in last["status"]
    assert updates[2]["mat"].data[0].z[0][1] is None  # partial grid: the second cell is not measured yet
    with pytest.raises(gr.Error, match="too many"):
        list(run_sweep("TALON: μ × N", ",".join(["0.1"] * 6), ",".join(["8"] * 6), 1, 8))


def test_tune_cells_show_their_range_the_colours_midpoint_and_the_few_tokens_warning():
    last = list(run_sweep("Chain (vLLM's): γ", "1, 4", "", 1, 8))[-1]
    cells = last["speedup"].data[0]
    assert all(re.match(r"\d+\.\d\d×<br>.*\d+\.\d\d–\d+\.\d\d×", t) for t in cells.text[0])  # a range each
    assert all("⚠ few tokens" in t for t in cells.text[0])  # 1 prompt × 8 tokens: too few to rank
    assert cells.zmin == -cells.zmax and cells.colorbar.ticktext[2] == "1.00×"  # log scale, 1.0× in the middle
    summary = unescape(last["summary"])
    assert "too few tokens to rank: 2 cell(s) timed fewer than 64 tokens" in summary and "Fastest:" in summary
    assert "resamplings of its steps" in summary



def test_tune_times_ar_after_each_row_and_scores_every_cell_against_every_pass(monkeypatch):
    """Issue 46, item 5: a Tune cell read 1.03× (0.53–1.64) in one run and 2.23× (1.90–2.54) in the next, its range
    drawn against AR before and after the grid alone. AR is now timed after each row too, and every cell's range
    draws against all the passes: the first row's cells gain a range once their row's AR pass is in."""
    import ui.tune
    calls = []
    real = ui.tune.pooled_spread
    monkeypatch.setattr(ui.tune, "pooled_spread", lambda runs, passes: (calls.append(len(passes)), real(runs, passes))[1])
    updates = list(run_sweep("TALON: μ × N", "0.05, 0.2", "6, 8", 1, 8))
    status = [unescape(u["status"]) for u in updates]
    assert len(updates) == 1 + 7 + 1 and "plain AR (after row 1)" in status[3]
    assert "AR before the grid and after each row" in status[0]
    after_row = updates[4]["speedup"].data[0].text[0]
    assert all(re.search(r"\d+\.\d\d–\d+\.\d\d×", t) for t in after_row)  # row 1 ranged after its AR pass
    assert calls[-4:] == [3, 3, 3, 3]  # the final scores: every cell against the three passes


def test_tune_fixed_knobs_are_shown_and_reach_the_runs(monkeypatch):
    import ui.tune
    from core.knobs import PRESETS
    from ui.sweeps import SWEEPS, fixed_text
    talon = SWEEPS["TALON: μ × N"]
    embedded = PRESETS["embedded"]
    assert talon.fixed == {k: embedded[k] for k in ("K", "k_init", "shape_temperature")}  # this CPU's shape
    assert "0.1" in talon.xs.split(", ") and "12" in talon.ys.split(", ")  # the embedded preset is a cell
    assert {"4", "8", "60"} <= set(talon.ys.split(", "))  # small and large budgets beside it
    act = SWEEPS["SpecBound: α × τ_exit"]
    assert "0" in act.xs.split(", ") and act.fixed["exit_layers"] == "stored"  # ACT off beside on, at `fast`
    seen = []
    real = ui.tune.measure_cell
    monkeypatch.setattr(ui.tune, "measure_cell", lambda method, knobs, *a: (seen.append(knobs), real(method, knobs, *a))[1])
    last = list(run_sweep("TALON: μ × N", "0.1", "6", 1, 8, fixed="K = 3, T_shape = 0.7"))[-1]
    assert seen == [{"K": 3, "k_init": 1, "shape_temperature": 0.7, "mu": 0.1, "N": 6}]  # k: the method's default
    assert "Held fixed:</b> K = 3, k = 1, T_shape = 0.7" in last["summary"]
    assert "held: K = 3, k = 1, T_shape = 0.7" in last["mat"].layout.title.text
    seen.clear()
    list(run_sweep("TALON: μ × N", "0.1", "6", 1, 8))  # API callers that leave it out: the sweep's own
    assert seen[0]["K"] == 2 and seen[0]["shape_temperature"] == 0.5
    with pytest.raises(gr.Error, match="μ is swept"):
        list(run_sweep("TALON: μ × N", "0.1", "6", 1, 8, fixed="μ = 0.2"))
    with pytest.raises(gr.Error, match="not a knob of specbound"):
        list(run_sweep("SpecBound: α × τ_exit", "0.5", "0.1", 1, 8, fixed="K = 2"))
    assert fixed_text(act.fixed) == ("d_max = 4, w_max = 3, ℓ_min = 2, exit layers = stored, V_exit = 1024, "
                                     "exit heads = paper")
    from ui.sweeps import parse_fixed
    assert parse_fixed("specbound", fixed_text(act.fixed), ("alpha", "tau_exit")) == act.fixed  # the box reads back
    with pytest.raises(ValueError, match="exit heads must be one of paper, shared, lens"):
        parse_fixed("specbound", "exit heads = mine", ("alpha", "tau_exit"))
    with pytest.raises(ValueError, match="not a knob of talon to hold fixed"):
        parse_fixed("talon", "μ schedule = adaptive", ("mu", "N"))  # a per-step choice, like auto


def test_the_page_shows_the_sweeps_fixed_knobs():
    import app
    from ui.sweeps import SWEEPS, fixed_text
    from ui.tune_tab import sweep_defaults
    demo = app.build_demo()
    box = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "tune-fixed")
    first = next(iter(SWEEPS))
    assert box.value == fixed_text(SWEEPS[first].fixed) == "K = 2, k = 1, T_shape = 0.5"
    chosen = sweep_defaults("SpecBound: α × τ_exit")
    assert chosen["fixed"].value == fixed_text(SWEEPS["SpecBound: α × τ_exit"].fixed)
    assert chosen["x_values"].value == "0, 0.25, 0.5, 1"


def test_tune_takes_its_best_static_tree_and_chain_to_a_server():
    last = list(run_sweep("Static tree (SGLang's): D × K", "1, 3", "2", 1, 8))[-1]
    status = last["status"]
    assert len(last["mat"].data[0].z[0]) == 2 and "--speculative-num-steps" in status
    assert "--speculative-eagle-topk 2" in status and "N=12 K=2" in status  # N as the fixed box held it
    assert "N + 1" in unescape(status)  # the conventions come with the flags
    last = list(run_sweep("Chain (vLLM's): γ", "1, 3", "", 1, 8))[-1]
    assert len(last["mat"].data[0].z) == 1 and '"num_speculative_tokens"' in unescape(last["status"])
    assert "checked against vLLM main" in unescape(last["status"])  # issue 34, item 11: the version it was checked against
    named = list(run_sweep("Chain (vLLM's): γ", "2", "", 1, 8, vllm_version="0.11.2"))[-1]
    assert "for vLLM 0.11.2" in unescape(named["status"])
    assert "nothing: one knob swept" in last["summary"]
    assert "speculative" not in list(run_sweep("TALON: μ × N", "0.05", "8", 1, 8))[-1]["status"]  # no engine has TALON


def test_tune_cancel_keeps_the_cells_that_finished():
    me = gr.Request(session_hash="tuner")
    running = run_sweep("TALON: μ × N", "0.05, 0.2", "8", 1, 8, request=me)
    for _ in range(3):  # estimate, AR before, first cell
        next(running)
    cancel_sweep(me)
    last = list(running)[-1]
    assert "Cancelled after 2 of 4" in last["status"] and last["mat"].data[0].z[0][0] is not None
    assert last["mat"].data[0].z[0][1] is None


def test_cost_curve_figure_marks_the_chosen_n_and_models_the_speedup():
    empty = cost_curve(None, "embedded", "embedded", "lookup")["curve"]
    assert len(empty.data[0].x) >= 8 and all(ms > 0 for ms in empty.data[0].y)  # measured t_verify(n)
    assert not empty.layout.annotations or all(a.text == "1 token (an AR step)" for a in empty.layout.annotations)
    assert "Step a TALON run" in empty.layout.title.text and "measured" in empty.layout.title.text
    assert empty.layout.xaxis.rangemode == "tozero" and "xaxis2" not in empty.layout  # one panel, from 0
    run = None
    for _ in range(2):
        run = step(run, N=16)["run"]
    fig = cost_curve(run)["curve"]
    names = [t.name for t in fig.data]
    assert "chosen N = 16" in names and "modelled speed-up" in names
    speed = fig.data[names.index("modelled speed-up")]
    assert max(speed.x) == 16 and all(v > 0 for v in speed.y)
    pure = cost_curve_figure([1, 8, 64], [10.0, 15.0, 33.0], 7, [(4, 1.1), (7, 1.3)], "t", retimed=[8], flag="busy")
    assert list(pure.data[0].y) == [10.0, 15.0, 33.0] and list(pure.data[1].x) == [8]  # the re-timed point ringed
    assert pure.data[2].y[0] == 15.0 and "⚠ busy" in pure.layout.title.text  # N = 7 verifies 8 tokens


def test_the_cost_curve_can_be_measured_again_from_the_page(monkeypatch, tmp_path):
    import core.auto.cost_model as cm
    from ui.tune_tab import remeasure_cost_curve
    monkeypatch.setattr(cm, "CACHE_DIR", tmp_path)
    monkeypatch.setattr(cm, "_MEMO", {})
    events = []
    real = cm._verify_curve
    monkeypatch.setattr(cm, "_verify_curve", lambda *a: (events.append("measure"), real(*a))[1])
    cost_curve(None, "embedded", "embedded", "lookup")
    cost_curve(None, "embedded", "embedded", "lookup")
    assert events == ["measure"]  # kept
    again = remeasure_cost_curve(None, "embedded", "embedded", "lookup")["curve"]
    assert events == ["measure", "measure"] and "measured 0 s ago" in again.layout.title.text
