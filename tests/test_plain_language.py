"""Numbers with their meaning: R beside its cost-curve-aware counterpart (so the page never shows a modelled
speed-up it knows to be wrong without saying so), a tooltip on every number and column, an imported trace that
says where it was timed, a long prompt that keeps the new tokens in view, and the static tree that says when it
is off."""
from html import unescape

import pytest

from core.auto.cost_model import CostModel
from core.metrics import curve_r, run_stats
from core.trace import SpecBoundStep, StepTrace
from ui import handlers as h
from ui.view_specs import VIEWS
from viz.html import PROMPT_SHOWN, levels_html, stats_html, text_html

from tests.handler_helpers import sb_step, step
from tests.viz_fixtures import chain_of, talon_example


def curve(verify: list[float], draft: list[float]) -> CostModel:
    return CostModel("cpu|m|fp32|x", [1, 2, 4, 8, 16], verify, [1, 2, 4, 8, 16], draft)


def test_r_on_the_cost_curve_is_r_with_this_machines_costs():
    traces = [talon_example(), chain_of(3)]
    flat = curve([10.0] * 5, [0.0] * 5)  # a GPU-like curve, drafting free: every step costs one forward
    assert abs(curve_r(traces, flat) - sum(t.tau for t in traces) / len(traces)) < 1e-9  # = MAT
    linear = curve([10.0, 20.0, 40.0, 80.0, 160.0], [1.0] * 5)  # a CPU-like curve: a bigger check costs more
    assert curve_r(traces, linear) < curve_r(traces, flat)
    assert curve_r(traces, None) is None
    sb = talon_example()
    sb.tree = None
    assert curve_r([sb], flat) is None  # SpecBound: no tree to cost


def test_the_costed_r_charges_what_the_verification_ran_not_a_whole_forward():
    """Two steps alike but for where verification resumed: the one that reused more drafted layers is modelled
    faster, while the papers' R = τ/(1 + δ) cannot tell them apart; without a measured λ (an older export) there
    is no costed R at all."""
    def step(verify: int) -> StepTrace:
        d = SpecBoundStep(0.5, 0.3, 6, 3, 1, "paper", 30, layers_draft=12, layers_verify=verify,
                          layers_equivalent=12 + verify + 2.0, final_head_layers=8.0)
        return StepTrace(0, "specbound", 5, tau=2, delta=14 / 30, specbound=d)
    deep, shallow = curve_r([step(24)], None), curve_r([step(30)], None)
    assert deep == pytest.approx(2 * 38 / (38 + 8)) and shallow == pytest.approx(2 * 38 / (44 + 8))
    assert deep > shallow
    old = step(24)
    old.specbound.final_head_layers = 0.0
    assert curve_r([old], None) is None


def test_every_number_and_column_says_what_it_is():
    s = run_stats([talon_example(), chain_of(3)], [10.0, 12.0], [1, 2, 3, 4, 5, 6, 7], True, None,
                  cost=curve([10.0, 20.0, 40.0, 80.0, 160.0], [1.0] * 5))
    html = stats_html(s)
    assert "R with this machine&#x27;s measured costs" in html or "R with this machine's measured costs" in html
    assert html.count('<div class="ss-stat ss-') == 9 and "assumes a verification costs one" in html
    table = levels_html(talon_example())
    assert table.count("<th title=") == 11 and "d = 0" in unescape(table)


def test_an_imported_trace_says_it_was_timed_elsewhere(tmp_path):
    run = step(step(None)["run"])["run"]
    path, _ = h.export_trace(run)
    out = h.import_run(VIEWS["talon"], run=None, path=path)
    assert "not measured here" in out["stats"] and "waiting for plain AR" not in out["stats"]


def test_a_long_prompt_folds_so_the_new_tokens_stay_in_view():
    long = "x = 1\n" * 200
    html = text_html(long, [chain_of(2)])
    assert '<details class="ss-fold">' in html and html.index("</details>") < html.index("ss-tok")
    assert len(unescape(html.split("</details>")[1].split('<span class="ss-tok')[0])) < PROMPT_SHOWN + 200
    assert "<details" not in text_html("short", [chain_of(2)])


def test_the_static_tree_says_when_it_is_off():
    run = step(None)["run"]
    off = h.replay(VIEWS["talon"], run=run, replay=1, with_static=False)
    assert "Static tree off" in off["static"].layout.annotations[0].text
    on = h.replay(VIEWS["talon"], run=run, replay=1, with_static=True)
    assert "Computing the static tree" in on["static"].layout.annotations[0].text


def test_replaying_an_earlier_step_keeps_the_trees_height():
    run = None
    for _ in range(4):
        run = step(run)["run"]
    heights = {h.replay(VIEWS["talon"], run=run, replay=i + 1)["tree"].layout.height for i in range(4)}
    assert len(heights) == 1  # the page does not move under the replay slider


def test_a_specbound_run_shows_its_costs_measured_in_layers():
    """SpecBound's stats put R with its measured costs (the layers its verification ran, the final head) beside
    the papers' R, and its view says what the final head costs."""
    out = sb_step(sb_step(None)["run"])
    d = out["run"].traces[-1].specbound
    assert d.final_head_layers > 0
    stats = unescape(out["stats"])
    value = stats.split("R with this machine's measured costs</div>")[1].split("</div>")[0]
    assert value.startswith('<div class="ss-v">') and value.endswith("×")  # a number, not a run's blank
    assert "final norm and LM head cost" in unescape(out["why"])
