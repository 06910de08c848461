"""viz/ on hand-written traces, no model: node counts, colours by status, hover fields, level gates,
the Oracle line, the SpecBound heatmap and bars, the text and stats panels."""
import re
import subprocess
import sys

import pytest

from viz.exits_fig import confidence_heatmap, exit_bars, first_crossings, why_stopped
from viz.html import budget_html, levels_html, stats_html, text_html, token_origins
from viz.outcome_figs import oracle_scatter, tau_delta_timeline
from viz.tune_figs import CellScore, compare_bars, diverging_range, mat_heatmap, ranking_html, speedup_heatmap
from viz.palette import STATUS_COLORS
from core.metrics import Baseline, lossless_check, run_stats
from core.trace import StepTrace, TreeStep
from viz.tree_fig import short, tree_figure
from viz.tree_layout import MAX_SLOTS, build_graph, collapse_wide, leaves, tidy_layout

from tests.viz_fixtures import chain_of, specbound_example, talon_example, wide_tree


def by_meta(fig, meta):
    return [t for t in fig.data if t.meta == meta]


def test_tree_nodes_coloured_by_status():
    fig = tree_figure(talon_example())
    counts = {m: len(by_meta(fig, m)[0].x) for m in ("accepted", "rejected", "unreached", "pruned")}
    assert counts == {"accepted": 1, "rejected": 2, "unreached": 1, "pruned": 2}
    for status in counts:
        assert by_meta(fig, status)[0].marker.color == STATUS_COLORS[status]
    assert len(by_meta(fig, "bonus")) == 1 and by_meta(fig, "bonus")[0].text[0] == "x"


def test_pruned_toggle_hides_faint_nodes():
    fig = tree_figure(talon_example(), show_pruned=False)
    assert not by_meta(fig, "pruned")
    assert sum(len(t.x) for t in fig.data if t.meta in ("accepted", "rejected", "unreached")) == 4


def test_hover_has_token_q_score_target_prob_and_choice():
    fig = tree_figure(talon_example())
    hover = by_meta(fig, "rejected")[0].hovertext
    d = next(h for h in hover if "<b>d</b>" in h)
    assert "q = 0.900" in d and "p(u) = 0.5400" in d and "target p = 0.100" in d
    assert "target chose x here (p = 0.800)" in d
    pruned = " ".join(by_meta(fig, "pruned")[0].hovertext)
    assert "pruned by gate" in pruned and "pruned by budget" in pruned


def test_levels_show_anchor_and_gate():
    fig = tree_figure(talon_example())
    ticks = list(fig.layout.yaxis.ticktext)
    assert ticks[0] == "root"
    assert "m_d=0.54" in ticks[2] and "μ·m_d=0.11" in ticks[2] and "kept 2/4" in ticks[2]
    assert ticks[1] == "<b>d=0</b> kept 2/3"  # Top-K level: no gate
    table = levels_html(talon_example())
    assert "0.108" in table and "budget" in table


def test_node_size_grows_with_score():
    fig = tree_figure(talon_example(), show_pruned=False)
    acc, unreached = by_meta(fig, "accepted")[0], by_meta(fig, "unreached")[0]
    assert acc.marker.size[0] > unreached.marker.size[0]  # p(u) 0.6 vs 0.18


def test_tidy_layout_centres_parents_and_uses_depth():
    t = talon_example()
    pos = tidy_layout(build_graph(t, show_pruned=False))
    assert pos["root"][1] == 0 and pos["n0"][1] == 1 and pos["n2"][1] == 2
    assert pos["root"][0] == pytest.approx((pos["n0"][0] + pos["n1"][0]) / 2)
    assert pos["n0"][0] == pos["n2"][0]  # a single child sits under its parent


@pytest.mark.parametrize("trace", [wide_tree(96), chain_of(96)], ids=["wide96", "chain96"])
def test_layout_readable_at_96_nodes(trace):
    pos = tidy_layout(build_graph(trace))
    assert len(pos) == 97
    by_level = {}
    for x, level in pos.values():
        by_level.setdefault(level, []).append(x)
    for xs in by_level.values():  # no two nodes of a level share a spot
        assert len(set(xs)) == len(xs)
    fig = tree_figure(trace, show_pruned=False)
    shown = sum(len(t.x) for t in fig.data if t.meta in ("accepted", "rejected", "unreached"))
    groups = by_meta(fig, "more")
    folded = sum(int(re.search(r"\d+", text)[0]) for t in groups for text in t.text)
    assert shown + folded == 96  # every node is drawn or counted in a "+k" group or a deep tree's "… k more"
    assert leaves(collapse_wide(build_graph(trace, False), set())) <= MAX_SLOTS  # columns a half panel can hold
    if groups:
        assert all("more</b> nodes" in h for h in groups[0].hovertext)
    xs = [x for t in fig.data if t.meta for x in t.x]
    lo, hi = fig.layout.xaxis.range
    assert lo < min(xs) - 0.5 and hi > max(xs) + 0.5  # edge nodes and their labels stay inside


def test_folding_keeps_the_accepted_path_and_labels_say_when_cut():
    t = wide_tree(96, 12)
    t.nodes[95].status, t.nodes[95 % 12].status = "accepted", "accepted"
    t.accepted_path = [95 % 12, 95]
    t.choices[-1].at, t.choices[-1].text = 95, "assertEqual"
    fig = tree_figure(t)
    accepted = by_meta(fig, "accepted")[0]
    assert len(accepted.x) == 2 and "w95" in accepted.text
    assert by_meta(fig, "bonus")[0].text[0] == "assertEqual"  # whole, not cut at 8 characters
    assert short("a_very_long_token_name", 10) == "a_very_lo…"


def test_empty_and_ar_steps_draw_a_hint():
    assert tree_figure(None).layout.annotations[0].text.startswith("Press Step")
    t = talon_example()
    t.nodes, t.pruned = [], []
    assert "autoregressive" in tree_figure(t).layout.annotations[0].text


def test_oracle_line_and_points():
    fig = oracle_scatter({"talon": [talon_example(0), talon_example(1)], "static (same prefix)": [chain_of(3)]})
    oracle = by_meta(fig, "oracle")[0]
    assert list(oracle.x) == list(oracle.y)
    assert [t.name for t in fig.data][:2] == ["talon", "static (same prefix)"]
    assert list(fig.data[0].x) == [2, 2] and list(fig.data[0].y) == [2, 2]


def test_timeline_has_tau_and_delta():
    fig = tau_delta_timeline([talon_example(0), chain_of(4)])
    assert list(fig.data[0].y) == [2, 5] and list(fig.data[1].y) == [2, 4]


def test_confidence_heatmap_rows_exits_and_bounds():
    t = specbound_example()
    fig = confidence_heatmap(t, annealed=False)
    z = fig.data[0].z
    assert len(z) == 8 and len(z[0]) == 3  # L layers × drafted tokens
    assert z[1][0] == pytest.approx(0.99) and z[2][0] is None  # token 1 stopped at its exit layer
    assert list(by_meta_name(fig, "exit layer").y) == [2, 3]  # the d_max token has no exit star
    shapes = fig.layout.shapes
    assert any(s.y0 == 4.5 for s in shapes)  # d_max line
    assert any(s.x0 == 2.5 for s in shapes)  # w_max line after the 3rd token
    annealed = confidence_heatmap(t, annealed=True).data[0].z
    assert annealed[1][0] == pytest.approx(0.99 * 0.9)
    assert "τ_exit=0.85" in fig.data[0].colorbar.ticktext[1]


def test_raw_view_shows_where_tokens_would_exit_without_act():
    t = specbound_example()  # τ_exit = 0.85; annealed = 0.9 × raw
    assert first_crossings(t, annealed=False) == [2, 3, None]
    assert first_crossings(t, annealed=True) == [2, 3, None]
    t.exits[0].raw_conf = [0.9, 0.99]  # an over-confident first layer that annealing deflates to 0.81
    assert first_crossings(t, annealed=False)[0] == 1 and first_crossings(t, annealed=True)[0] == 2
    outlines = [s for s in confidence_heatmap(t, annealed=False).layout.shapes if s.name == "first ≥ τ_exit"]
    assert [(s.x0, s.y0) for s in outlines] == [(-0.5, 0.5), (0.5, 2.5)]


def by_meta_name(fig, name):
    return next(t for t in fig.data if t.name == name)


def test_exit_bars_and_stop_reason():
    t = specbound_example()
    fig = exit_bars(t)
    assert list(fig.data[0].y) == [2, 3, 4]
    assert fig.data[0].marker.color[0] == STATUS_COLORS["accepted"]
    assert "d_max" in why_stopped(t) and "d_max = 4" in why_stopped(t)
    assert confidence_heatmap(None).layout.annotations


def test_verification_bars_draw_the_layers_a_token_was_carried_along_then_the_pass():
    """A step records each token's exact depth: a token that exited at 2 and was carried to d_max = 4 by a
    later token shows layers 3-4 as carried, then the pass from 4 up; an older export (no depths) keeps the
    prefix minimum of its drafting depths."""
    t = specbound_example()
    t.specbound.exact_depths = [4, 4, 4]
    fig = exit_bars(t, verify=True)
    carried = next(tr for tr in fig.data if tr.meta == "carried")
    assert list(carried.base) == [2, 3] and list(carried.y) == [2, 1]
    assert list(next(tr for tr in fig.data if tr.meta == "verify").base) == [4, 4, 4]
    old = exit_bars(specbound_example(), verify=True)
    assert not any(tr.meta == "carried" for tr in old.data)
    assert list(next(tr for tr in old.data if tr.meta == "verify").base) == [2, 2, 2]


def test_run_heatmap_spans_every_step_and_highlights_the_current_one():
    from viz.run_heatmap import run_heatmap
    steps = [specbound_example(), specbound_example()]
    steps[1].index = 1
    fig = run_heatmap(steps, 0, annealed=True)
    cols = 2 * len(steps[0].exits)
    assert len(fig.data[0].z[0]) == cols and fig.layout.title.text.startswith("Layer × token confidence")
    current = [s for s in fig.layout.shapes if s.name == "current step"]
    assert len(current) == 1 and current[0].x0 == -0.5 and current[0].x1 == len(steps[0].exits) - 0.5
    assert list(fig.layout.xaxis.ticktext)[0].startswith("s1·") and list(fig.layout.xaxis.ticktext)[-1].startswith("s2·")
    assert run_heatmap([], None).layout.annotations


def test_stop_reason_is_worded_per_method():
    t = talon_example()
    t.draft_stop = "depth"
    assert "static" not in why_stopped(t) and "remaining length" in why_stopped(t)
    t.method, t.tree = "static", TreeStep("static", {"depth": 1})
    assert "its depth D = 1" in why_stopped(t)  # two levels grown: D + 1
    t.tree = TreeStep("static", {"depth": 8})
    assert "remaining length" in why_stopped(t)  # stopped before D: the length limit
    t.draft_stop = "frontier"
    assert "gate" not in why_stopped(t)


def test_text_marks_bonus_tokens_and_escapes():
    t = talon_example()
    t.committed_texts = ["<a>", "x"]
    assert token_origins(t) == ["draft", "bonus"]
    html = text_html("def f():", [t])
    assert "&lt;a&gt;" in html and "<a>" not in html
    assert html.count("ss-bonus") == 1 and html.count("ss-draft") == 1


def test_stats_mat_delta_R_and_speedup_over_the_same_positions():
    traces = [talon_example(0), chain_of(4)]  # τ 2 and 5, δ 2 and 4, draft ms 2 and 0
    base = Baseline(list(range(7)), [50.0] * 7, done=True)  # AR: 50 ms per position
    s = run_stats(traces, [50.0, 150.0], list(range(7)), True, base, finished=True)
    assert s.mat == 3.5 and s.mean_delta == 3.0
    assert s.c == pytest.approx((2.0 / 6) / 50.0)
    assert s.R == pytest.approx(3.5 / (1 + s.c * 3.0))
    assert s.tok_s == pytest.approx(35.0)
    assert s.speedup == pytest.approx(350 / 200) and s.spread.positions == 7
    assert s.lossless is True
    html = stats_html(s)
    assert "lossless check ✓" in html and "plain greedy decoding" in html and "1.75×" in html and "noisy" in html
    # issue 34, item 5: each speed number says whether it was measured or modelled
    cells = re.findall(r'<div class="ss-stat ss-(\w+)"[^>]*><div class="ss-k"><span class="ss-kind">(\w+)</span> '
                       r'([^<]*)</div>', html)
    kinds = {name: kind for kind, shown, name in cells if kind == shown}
    assert kinds["speed-up over AR, timed here"] == "measured" and kinds["tokens/s"] == "measured"
    assert kinds["R = τ/(1+cδ), the papers' model"] == "modelled"
    assert kinds["R with this machine's measured costs"] == "modelled" and len(kinds) == 9


def test_speedup_uses_only_positions_ar_has_timed_and_a_prefill_is_taken_out():
    base = Baseline([1, 2, 3], [10.0, 10.0, 10.0])  # AR has timed 3 positions so far
    s = run_stats([chain_of(1), chain_of(1), chain_of(1)], [530.0, 10.0, 10.0], [1, 2, 3, 4, 5, 6], True, base,
                  prefill_ms=500.0)
    assert s.spread.positions == 2 and s.speedup == pytest.approx(20 / 30)  # τ = 2 each: only step 1 is covered
    assert s.lossless is None  # AR has not reached the run's last token yet


def test_speedup_spread_resamples_steps():
    from core.metrics import measured_speedup
    base = Baseline(list(range(6)), [10.0] * 6)
    sp = measured_speedup([1] * 6, [5.0, 5.0, 5.0, 20.0, 20.0, 20.0], base)
    assert sp.value == pytest.approx(60 / 75)
    assert sp.lo < sp.value < sp.hi
    assert measured_speedup([1, 1], [5.0, 5.0], base).lo is None  # too few steps for a range
    ar_over_itself = measured_speedup([1] * 6, [10.0] * 6, base)
    assert ar_over_itself.value == 1.0 and ar_over_itself.lo == ar_over_itself.hi == 1.0


def test_lossless_check_finds_the_first_difference():
    base = Baseline([1, 2, 3, 4], [1.0] * 4, done=True)
    assert lossless_check([1, 2, 9], base, True, False) == (False, "differs from plain decoding at output token 3")
    assert lossless_check([1, 2], base, True, False)[0] is True
    assert lossless_check([1, 2], base, True, True)[0] is False  # the run stopped where AR went on
    assert lossless_check([1, 2], base, False, False)[0] is None
    assert "✗" in stats_html(run_stats([chain_of(1)], [1.0], [9, 9], True, base))


def test_budget_meter():
    assert "4 of N = 4 nodes used" in budget_html(talon_example())
    assert "of γ = 3" in budget_html(chain_of(3))


def test_compare_bars_carry_error_bars_over_each_range():
    fig = compare_bars([{"method": "ar", "mat": 1.0, "speedup": 1.0},
                        {"method": "talon", "mat": 3.0, "speedup": 1.5, "lo": 1.25, "hi": 1.625}])
    assert list(fig.data[0].y) == [1.0, 3.0]
    err = fig.data[1].error_y
    assert err.type == "data" and not err.symmetric
    assert list(err.array) == [0.0, 0.125] and list(err.arrayminus) == [0.0, 0.25]  # up to hi, down to lo


def cell(value, lo=None, hi=None, tokens=100, mat=2.0):
    from core.metrics import Speedup
    return CellScore(mat, (mat - 0.1, mat + 0.1), Speedup(value, lo, hi, tokens), tokens, tokens < 64)


def test_sweep_heatmaps_show_each_cells_range_and_the_few_tokens_warning():
    cells = [[cell(1.2, 1.1, 1.3), cell(0.9, tokens=16)], [cell(1.5, 1.4, 1.6), None]]
    hm = speedup_heatmap([0.01, 0.1], [16, 32], cells, "speed-up", "μ", "N")
    text = hm.data[0].text
    assert text[0][0].startswith("1.20×") and "1.10–1.30×" in text[0][0] and "few tokens" not in text[0][0]
    assert "⚠ few tokens" in text[0][1] and text[1][1] == ""
    mat = mat_heatmap([0.01, 0.1], [16, 32], cells, "MAT", "μ", "N")
    assert "1.90–2.10" in mat.data[0].text[0][0]


def test_speedup_colours_diverge_from_one():
    import math
    hm = speedup_heatmap([1, 2, 3], [None], [[cell(0.91), cell(1.0), cell(2.0)]], "speed-up", "γ", "")
    h = hm.data[0]
    assert h.zmin == -h.zmax and h.z[0][1] == 0.0  # log2: 1.0× sits exactly at the neutral middle
    assert h.colorscale[2][0] == 0.5 and h.colorscale[2][1] == "#f7f7f7"
    assert h.colorbar.ticktext[2] == "1.00×" and h.z[0][2] == pytest.approx(1.0)
    position = (math.log2(0.91) - h.zmin) / (h.zmax - h.zmin)
    assert 0.35 < position < 0.5  # 0.91× is a faint "slower", nowhere near the scale's red end
    assert diverging_range([1.01, 0.99]) == pytest.approx((-math.log2(1.5), math.log2(1.5)))  # noise never looks decisive


def test_ranking_names_the_fastest_its_ties_and_warns_on_few_tokens():
    from core.metrics import Speedup
    from viz.tune_figs import Ranked
    cells = [Ranked("N = 8", Speedup(1.4, 1.3, 1.5, 96)), Ranked("N = 12", Speedup(1.35, 1.25, 1.45, 96)),
             Ranked("N = 60", Speedup(0.8, 0.75, 0.85, 96))]
    html = ranking_html(cells, 0, 64, "K = 2, T_shape = 0.5", "note")
    assert "Fastest:</b> N = 8: 1.40×" in html and "possibly as fast: N = 12" in html and "N = 60" not in html
    assert "K = 2, T_shape = 0.5" in html and "too few tokens" not in html
    assert "too few tokens to rank: 3 cell(s)" in ranking_html(cells, 3, 64, "", "note")
    assert "<b>x</b>" not in ranking_html([Ranked("<b>x</b>", Speedup(1.0, None, None, 1))], 0, 64, "", "")


def test_viz_never_imports_torch_or_gradio():
    code = ("import sys, viz.tree_fig, viz.exits_fig, viz.outcome_figs, viz.tune_figs, viz.cost_fig, viz.html, core.metrics; "
            "print('torch' in sys.modules, 'gradio' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


@pytest.mark.parametrize("make", [talon_example, lambda: chain_of(3), specbound_example])
def test_trace_json_round_trip(make):
    """An exported trace reads back as the same typed record (what Import relies on)."""
    import json
    t = make()
    back = StepTrace.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back == t and back.budget() == t.budget()


def test_acceptance_by_depth_counts_steps_through_each_depth():
    from core.metrics import acceptance_by_depth
    from viz.outcome_figs import depth_acceptance_bars
    rows = acceptance_by_depth([talon_example(), chain_of(3)])
    assert [(r.depth, r.steps, r.accepted) for r in rows] == [(0, 2, 2), (1, 2, 1), (2, 1, 1)]
    fig = depth_acceptance_bars(rows)
    assert list(fig.data[0].y) == [1.0, 0.5, 1.0] and list(fig.data[0].x) == [0, 1, 2]  # d as the tree numbers it
    assert depth_acceptance_bars([]).layout.annotations[0].text.startswith("Press Step")


def table_rows(page: str) -> list[list[str]]:
    body = page.split("</tr>", 1)[1]  # after the header
    return [re.findall(r"<td>(.*?)</td>", row) for row in body.split("</tr>") if "<td>" in row]


def test_the_levels_table_adds_up_on_every_row():
    """Issue 46, item 6: a TALON level read 'scored 96, kept 16, cut by the gate 74, cut by the budget 62'
    (62 counted children never scored); now kept + gate + budget + Top-K = scored on every row, the unscored
    ones in a column of their own, on random traces of the real policy."""
    from tests.walk_helpers import random_talon_trace
    from viz.html import levels_html
    seen_unscored = False
    for seed in range(40):
        t = random_talon_trace(seed)
        for row in table_rows(levels_html(t)):
            d, frontier, scored, m_d, gate, kept, cut_gate, cut_budget, cut_topk, unscored, left = row
            assert int(kept) + int(cut_gate) + int(cut_budget) + int(cut_topk) == int(scored), (seed, row)
            seen_unscored |= int(unscored) > 0
    assert seen_unscored


def test_a_static_tables_rows_and_note_match_its_tree():
    """Issue 46, item 6: '9 levels grown, 7 kept' over a table of 'kept 10/100' per row (80 where the rerank
    keeps 60). The static table shows what each level expanded and what the rerank kept at each depth."""
    from tests.walk_helpers import random_talon_trace
    from viz.html import levels_html
    t = random_talon_trace(3)
    t.tree.policy = "static"
    page = levels_html(t)
    rows = table_rows(page)
    assert len(rows) == len(t.levels) and sum(int(r[-1]) for r in rows) == len(t.nodes)
    assert f"{len(t.levels)} levels grown" in page and f"keeps the best {len(t.nodes)} by p(u)" in page
