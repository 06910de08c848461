"""SpecBound as the paper describes it, and honest where we deviate: d_max bounds every draft (a check always
happens there), the paper and fast presets are one name (CLI) or one click (page) apart, and the page says
what its confidences are computed over and why a d_max above L changes nothing."""
import html

import pytest

from core.engine import Session
from core.knobs import PRESETS, presets_for, resolve
from core.methods import build_method
from core.specbound.method import check_layers
from ui.knobs import SPECBOUND_KNOBS, SPECBOUND_PRESETS, apply_specbound_preset
from viz.run_heatmap import run_heatmap

D_MAXES = {"paper": (2, 3, 4), "fast": (2, 4, 6, 8)}  # paper's w_max = 3 binds above d_max = 4 here


def test_a_check_always_happens_at_d_max():
    assert check_layers((4,), (4,), 2, 2) == (2,)  # below the stored set: d_max itself is checked
    assert check_layers("stored", (4,), 2, 6) == (4, 6)
    assert check_layers("stored", None, 2, 5) == (2, 3, 4, 5)  # heads without a stored set: every layer
    assert check_layers("all", (4,), 1, 4) == (1, 2, 3, 4)


@pytest.mark.parametrize("preset", ["paper", "fast"])
def test_every_d_max_drafts_differently_commits_more_than_one_token_and_equals_ar(target, heldout_prompts,
                                                                                   ar_reference, preset):
    prompts = heldout_prompts[:2]
    runs = {}
    for d_max in D_MAXES[preset]:
        method = build_method("specbound", preset=preset, d_max=d_max, record_raw=0)
        results = [Session(target, method, p, max_new_tokens=24).generate() for p in prompts]
        for p, r in zip(prompts, results):
            assert r.output_ids == ar_reference(target, p, 24)[1], (preset, d_max)
        steps = sum(r.steps for r in results)
        runs[d_max] = (sum(len(r.output_ids) for r in results) / steps,
                       tuple(tuple(t.tau for t in r.traces) for r in results))
        assert all(t.specbound.exit_layers[-1] == d_max for r in results for t in r.traces)
    assert all(mat > 1 for mat, _ in runs.values()), runs
    assert len({steps for _, steps in runs.values()}) == len(D_MAXES[preset])  # a different draft at each


def test_the_presets_are_the_papers_settings_and_ours_by_name():
    paper, fast = resolve("specbound", {"preset": "paper"}), resolve("specbound", {"preset": "fast"})
    assert paper == resolve("specbound", {})  # faithful by default
    assert (paper["min_exit_layer"], paper["exit_layers"], paper["exit_vocab"]) == (1, "all", 0)
    assert (fast["min_exit_layer"], fast["exit_layers"], fast["exit_vocab"]) == (2, "stored", 1024)
    assert presets_for("specbound") == ["paper", "fast"] and "fast" not in presets_for("talon")
    assert resolve("specbound", {"preset": "fast", "exit_vocab": 0})["exit_vocab"] == 0  # given beats the preset
    assert set(PRESETS["fast"]) <= {k.name for k in SPECBOUND_KNOBS} | {"exit_layers"}


def test_paper_and_fast_are_one_click_apart_on_the_page():
    paper, fast = list(SPECBOUND_PRESETS)
    assert paper.startswith("paper") and fast.startswith("fast") and "ours, not the paper's" in fast
    names = [k.name for k in SPECBOUND_KNOBS] + ["exit_layers"]
    page = lambda preset: {k: v for k, v in resolve("specbound", {"preset": preset}).items()  # noqa: E731
                           if k != "exit_heads"}  # the page exits through the default heads (the CLI may pick others)
    assert dict(zip(names, apply_specbound_preset(paper))) == page("paper")
    assert dict(zip(names, apply_specbound_preset(fast))) == page("fast")
    assert {"exit_vocab", "min_exit_layer"} <= {k.name for k in SPECBOUND_KNOBS}  # V_exit and ℓ_min on the page
    for k in SPECBOUND_KNOBS:
        if k.name in ("exit_vocab", "min_exit_layer"):
            assert "ours, not the paper's" in k.info


def test_the_page_says_what_the_confidence_is_over_and_why_a_d_max_above_l_changes_nothing(target):
    from tests.handler_helpers import sb_step
    out = sb_step(None, d_max=20, exit_vocab=1024, min_exit_layer=2, tau_exit=0.1)
    why, run = html.unescape(out["why"]), out["run"]
    assert "d_max = 20 is above L = 12" in why and "V_exit = 1024" in why and "ours, not the paper's" in why
    title = run_heatmap(run.traces, 0).layout.title.text
    assert "over the V_exit = 1024 most frequent tokens" in title
    whole = sb_step(None, exit_vocab=0)["run"]
    assert "over the whole vocabulary" in run_heatmap(whole.traces, 0).layout.title.text


def test_a_bench_row_can_name_a_preset():
    from cli.bench import parse_spec
    label, name, _, knobs = parse_spec("specbound:preset=fast:d_max=6", {"preset": "paper"}, "eagle3")
    method = build_method(name, **knobs)
    assert (method.exit_layers, method.exit_vocab, method.d_max) == ("stored", 1024, 6)
