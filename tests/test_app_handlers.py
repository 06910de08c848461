"""Handlers called directly (no server): step / play / reset / replay, the static side-by-side, bad input
that must give a clear message and keep the session usable, export, the model box, the drafter choice, auto's
readout. Compare, Tune and the cost curve: tests/test_tab_handlers.py."""
import json
import re
from html import unescape

import gradio as gr
import pytest

from ui import handlers as h
from ui.knobs import PRESETS, SAMPLING_KNOBS, TALON_KNOBS, apply_preset, validate
from ui.models import DEFAULT_DRAFTER, resolve_model
from ui.view_specs import VIEWS

from tests.handler_helpers import PROMPT, TALON, n_nodes, sb_step, step


def test_step_draws_tree_and_returns_trace():
    out = step(None)
    run = out["run"]
    assert len(run.traces) == 1
    assert n_nodes(out["tree"]) == len(run.traces[0].nodes) > 0
    assert out["trace"]["index"] == 0 and out["trace"]["method"] == "talon"
    assert "of N = 16" in out["budget"]
    assert [b.name for b in out["acceptance"].data][0].startswith("accepted")  # the view added by its spec


def test_static_side_by_side_leaves_the_session_text_alone():
    run = step(None)["run"]
    ids = list(run.ids)
    extras = h.extras(VIEWS["talon"], run=run)
    static, scatter, stats = extras["static"], extras["scatter"], extras["stats"]
    assert run.ids == ids and len(run.traces) == 1
    assert run.shadows[0].method == "static" and run.shadows[0].context_len == run.traces[0].context_len
    assert n_nodes(static) == len(run.shadows[0].nodes) <= 16
    assert [t.name for t in scatter.data][:2] == ["talon", "static (same prefix)"]
    assert "lossless check ✓" in stats and "output equals plain greedy decoding" in stats
    assert stats.count("equals plain") == 1  # issue 34, item 4: the lossless line says it once


def test_replay_redraws_stored_steps_without_stepping():
    run = None
    for _ in range(3):
        run = step(run)["run"]
    outs = h.replay(VIEWS["talon"], run=run, replay=1)
    assert len(run.traces) == 3 and "run" not in outs  # replay never touches the state
    assert n_nodes(outs["tree"]) == len(run.traces[0].nodes)
    assert outs["trace"]["index"] == 0
    assert h.replay(VIEWS["talon"], run=run, replay=99)["trace"]["index"] == 2  # out of range: the latest step


def test_bad_inputs_give_clear_errors_and_keep_the_session():
    run = step(None)["run"]
    with pytest.raises(gr.Error, match="prompt is empty"):
        step(run, prompt="   ")
    with pytest.raises(gr.Error, match=r"N \(node budget\) must be between 1 and 128"):
        step(run, N=0)
    with pytest.raises(gr.Error, match="μ"):
        step(run, mu=5)
    with pytest.raises(gr.Error, match="temperature"):
        step(run, temperature=-1)
    again = step(run)["run"]
    assert again is run and len(run.traces) == 2


def test_changed_settings_start_a_new_run():
    run = step(None)["run"]
    other = step(run, N=8)["run"]
    assert other is not run and len(other.traces) == 1


def test_finished_run_warns_instead_of_failing():
    run = None
    for _ in range(12):
        run = step(run, max_new_tokens=3)["run"]
        if run.done:
            break
    assert run.done
    n = len(run.traces)
    with pytest.warns(UserWarning, match="finished"):
        out = step(run, max_new_tokens=3)
    assert out["run"] is run and len(run.traces) == n


def play(on_tick, values: dict, ticks: int = 40) -> tuple:
    """Tick like the page's timer until playing stops; returns (run, every update yielded, in order)."""
    run, updates = None, []
    for _ in range(ticks):
        for update in on_tick(**values, run=run):
            updates.append(update)
            run = update.get("run", run)
        if "timer" in updates[-1]:
            break
    return run, updates


def plain(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html.split('<div class="ss-legend">')[0]))


def test_play_ticks_until_done_then_stops_the_timer(monkeypatch):
    monkeypatch.setattr(h, "REVEAL_S", 0.0)
    timer, button = h.toggle_play(h.PLAY, 0.5)
    assert timer.active and button.value == h.PAUSE
    on_tick = h.tick(VIEWS["talon"])
    values = dict(prompt=PROMPT, **{**TALON, "max_new_tokens": 3})
    run, updates = play(on_tick, values, 6)
    assert run.done and updates[-1]["timer"].active is False and updates[-1]["play"].value == h.PLAY
    bad = list(on_tick(**{**values, "prompt": ""}, run=None))  # an error stops playing instead of repeating
    assert len(bad) == 1 and bad[0]["timer"].active is False


def test_play_streams_the_text_token_by_token_and_ends_at_ar_greedy(monkeypatch):
    from core.ar import ARMethod
    from core.engine import Session
    from ui.models import get_models
    monkeypatch.setattr(h, "REVEAL_S", 0.0)
    run, updates = play(h.tick(VIEWS["talon"]), dict(prompt=PROMPT, **{**TALON, "max_new_tokens": 24}))
    texts = [plain(u["text"]) for u in updates if "text" in u]
    assert run.done and len(texts) > len(run.traces) >= 2  # more updates than steps: tokens stream within a step
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))  # each shown text extends the one before
    assert [len(b) > len(a) for a, b in zip(texts, texts[1:])].count(False) == 0  # one more token each time
    target = get_models("embedded", "embedded", needs_draft=False)[0]
    ar = Session(target, ARMethod(), PROMPT, max_new_tokens=24).generate()
    assert run.output_ids == ar.output_ids  # greedy: exactly AR's tokens
    assert texts[-1] == run.prompt_text() + "".join(t for s in run.traces for t in s.committed_texts)
    assert texts[-1].endswith(target.tokenizer.decode(ar.output_ids))


def test_reset_forgets_the_run():
    out = h.reset(VIEWS["talon"], run=step(None)["run"])
    assert out["run"] is None and out["timer"].active is False and out["play"].value == h.PLAY


def test_export_trace_file_and_data(tmp_path):
    run = step(step(None)["run"])["run"]
    path, data = h.export_trace(run)
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    assert saved == json.loads(json.dumps(data))
    assert len(saved["steps"]) == 2 and saved["config"]["N"] == 16
    assert saved["output_ids"] == run.output_ids
    with pytest.raises(gr.Error, match="nothing to export"):
        h.export_trace(None)


def test_specbound_step_heatmap_and_replay():
    out = sb_step(None)
    run, heatmap, why = out["run"], out["heatmap"], out["why"]
    assert run.traces[0].method == "specbound"
    assert heatmap.data[0].type == "heatmap" and len(heatmap.data[0].z) == run.traces[0].specbound.num_layers
    assert "Drafting stopped" in why
    raw = h.replay(VIEWS["specbound"], run=run, replay=1, annealed=False)["heatmap"]
    assert "raw" in raw.layout.title.text


def test_knob_validation_messages():
    assert validate(TALON_KNOBS, {"N": "60", "K": 10, "mu": 0.03, "k_init": 1, "shape_temperature": 1})["N"] == 60
    with pytest.raises(ValueError, match="whole number"):
        validate(TALON_KNOBS, {"N": 6.5, "K": 10, "mu": 0.03, "k_init": 1, "shape_temperature": 1})
    with pytest.raises(ValueError, match="must be a number"):
        validate(SAMPLING_KNOBS, {"temperature": "hot", "seed": 0, "max_new_tokens": 4})


@pytest.mark.parametrize("name", ["/etc", "assets/models", "../x/y", "./target", "a/b/c", "C:\\models"])
def test_model_box_refuses_local_paths(name):
    with pytest.raises(ValueError, match="Hub id"):
        resolve_model(name, "target")


def test_model_box_accepts_embedded_and_hub_ids():
    assert resolve_model("embedded", "target").endswith("target")
    assert resolve_model("Qwen/Qwen2.5-0.5B", "target") == "Qwen/Qwen2.5-0.5B"


def test_ar_baseline_is_timed_for_this_prompt_over_the_same_positions():
    from ui.baseline import BASELINES
    run = step(step(None)["run"])["run"]
    h.extras(VIEWS["talon"], run=run, with_static=False)
    assert len(run.base.token_ms) == len(run.output_ids) > 0  # AR timed over the run's positions
    assert run.base.output_ids == run.output_ids  # greedy: AR is the same text
    other = step(None, prompt="import os\n")["run"]
    h.extras(VIEWS["talon"], run=other, with_static=False)
    assert other.base.output_ids == other.output_ids != run.output_ids  # its own prompt's AR
    c = run.config
    kept = BASELINES.timer(c.target, c.prompt, c.temperature, c.seed, c.max_new_tokens)
    html = h.remeasure(run)
    assert BASELINES.timer(c.target, c.prompt, c.temperature, c.seed, c.max_new_tokens) is not kept  # timed anew
    assert "speed-up over AR, timed here" in html and "noisy" in html
    with pytest.raises(gr.Error, match="press Step first"):
        h.remeasure(None)


def test_drafter_choice_changes_the_drafter_of_the_run_and_its_static_tree():
    runs = {}
    for name in ("model", "lookup") + (("eagle3",) if DEFAULT_DRAFTER == "eagle3" else ()):  # when its head ships
        out = step(runs.get("model"), drafter=name)
        run = runs[name] = out["run"]
        assert run.config.drafter == name and run.traces[0].drafter == name
        assert f"on {name}" in out["tree"].layout.title.text and "Σp(u)" in out["tree"].layout.title.text
        assert f"<b>{name}</b> proposed this tree" in out["budget"]
    assert runs["lookup"] is not runs["model"]  # a changed drafter is a fresh run
    h.extras(VIEWS["talon"], run=runs["model"])
    assert runs["model"].shadows[0].drafter == "model"  # the static side-by-side drafts with the same drafter
    assert h.export_trace(runs["model"])[1]["config"]["drafter"] == "model"
    with pytest.raises(gr.Error, match="unknown drafter"):
        step(None, drafter="oracle")


def test_auto_preset_records_the_chosen_n_in_the_view_and_the_export():
    label = next(name for name in PRESETS if name.startswith("auto"))
    values = apply_preset(label)
    assert values[-1] is True and values[0] == 96  # N is the cap, the auto box is ticked
    run, out = None, None
    knobs = dict(zip(("N", "K", "mu", "k_init", "shape_temperature"), values[:5]))
    for _ in range(3):
        out = step(run, **knobs, max_new_tokens=16, drafter="model", auto=values[-1])
        run = out["run"]
    chosen = run.traces[-1].auto
    assert chosen is not None and 1 <= chosen.N <= 96 and chosen.reason
    assert len(run.traces[-1].nodes) <= chosen.N
    assert f"auto chose N = {chosen.N}" in out["budget"] and "N (chosen by auto)" in out["budget"]
    assert out["trace"]["auto"]["N"] == chosen.N  # this step's trace JSON
    assert f"T_shape = {chosen.T_shape:g}" in out["budget"] and out["trace"]["auto"]["T_shape"] == chosen.T_shape
    data = h.export_trace(run)[1]
    assert data["config"]["auto"] == 1 and all(s["auto"]["reason"] for s in data["steps"])
    h.extras(VIEWS["talon"], run=run)
    assert run.shadows[2].tree.knob("N") == chosen.N  # the static tree gets the budget auto chose


def test_specbound_exit_layers_knob_shows_the_checked_layers_and_their_cost():
    out = sb_step(None, exit_layers="2,4")  # d_max = 6: checked too, always
    run, why = out["run"], out["why"]
    assert run.traces[0].specbound.exit_layers == [2, 4, 6]
    assert "Exit checks at layers 2, 4, 6 (d_max always)" in why and "layer equivalents" in why
    assert "whole vocabulary" in why
    with pytest.raises(gr.Error, match="exit layers"):
        sb_step(run, exit_layers="two")
