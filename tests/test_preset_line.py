"""Issue 34, item 5: which preset each view and tab runs, read from core/knobs.PRESETS, and its measured speed
from data (the run's own, or the benchmark's entry for exactly these knobs), never a number written in text;
Compare starts from the views' own settings and says what it ran; the preview is marked as one, so the first
Step visibly replaces it (item 3)."""
import json

from core import knobs as core_knobs
from core.model.cost_cache import fingerprint
from tests.handler_helpers import SPECBOUND, sb_step
from ui.baseline import time_baseline
from ui.compare_tab import VIEW, compare_knobs, compare_settings
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS
from ui.preset_line import method_knobs, preset_of, running_html

DEFAULTS = {k.name: k.default for k in TALON_KNOBS + SPECBOUND_KNOBS}


def test_the_line_names_the_preset_from_the_declared_presets():
    assert "runs preset paper" in running_html("specbound", DEFAULTS)
    fast = core_knobs.resolve("specbound", {"preset": "fast"})
    assert "runs preset fast" in running_html("specbound", fast)
    assert "your own settings" in running_html("specbound", {**DEFAULTS, "alpha": 0.9})
    embedded = core_knobs.resolve("talon", {"preset": "embedded"})
    assert preset_of("talon", method_knobs("talon", embedded)) == "embedded"
    assert "preset auto" in running_html("talon", {**embedded, "N": 96, "auto": True})


def test_the_speed_comes_from_a_benchmark_entry_for_exactly_these_knobs(tmp_path):
    knobs = method_knobs("specbound", DEFAULTS)
    path = tmp_path / "view_speed.json"
    entry = {"preset": "paper", "knobs": knobs, "speedup": 1.234, "lo": 1.1, "hi": 1.3, "prompts": 3,
             "max_new_tokens": 32, "measured": "2026-12-05", "model": "embedded"}  # the model it timed
    path.write_text(json.dumps({"machine": fingerprint("cpu"), "views": {"specbound": [entry]}}))
    line = running_html("specbound", DEFAULTS, path=path)
    assert "fingerprint" in line and "<b>1.23×</b>" in line and "3 prompts × 32 tokens" in line
    retuned = {**entry, "knobs": {**knobs, "alpha": 0.25}}  # the preset was retuned since it was measured
    path.write_text(json.dumps({"machine": fingerprint("cpu"), "views": {"specbound": [retuned]}}))
    assert "not measured on this machine yet" in running_html("specbound", DEFAULTS, path=path)
    path.write_text(json.dumps({"machine": "another CPU", "views": {"specbound": [entry]}}))
    assert "not measured on this machine yet" in running_html("specbound", DEFAULTS, path=path)  # issue 46 item 7
    path.write_text("not json")
    assert "not measured" in running_html("specbound", DEFAULTS, path=path)


def test_once_the_run_is_timed_the_line_quotes_the_runs_own_speed(tmp_path):
    run = None
    for _ in range(3):
        run = sb_step(run)["run"]
    time_baseline(run)
    values = {**DEFAULTS, **{k: v for k, v in SPECBOUND.items() if k in DEFAULTS}}
    line = running_html("specbound", values, run, path=tmp_path / "none.json")
    spread = run.stats().spread
    assert spread is not None and f"<b>{spread.value:.2f}×</b>" in line and "this run, 3 steps" in line
    other = running_html("specbound", {**values, "alpha": 0.3}, run, path=tmp_path / "none.json")
    assert "this run" not in other  # new knobs: the next Step starts another run, not measured yet


def test_compare_starts_from_the_views_settings_and_says_what_it_ran():
    view = {**core_knobs.resolve("talon", {"preset": "embedded"}), **core_knobs.resolve("specbound", {"preset": "fast"})}
    knobs = compare_knobs(VIEW, view)
    assert (knobs["N"], knobs["K"], knobs["mu"], knobs["shape_temperature"]) == (12, 2, 0.1, 0.5)
    assert knobs["exit_layers"] == "stored" and knobs["exit_vocab"] == 1024 and "auto" not in knobs
    said = compare_settings(knobs)
    assert "TALON at preset embedded" in said and "SpecBound at preset fast" in said
    assert compare_knobs(VIEW, {}) == compare_knobs("paper")  # untouched views run the papers' settings
    assert "preset paper" in compare_settings(compare_knobs("paper"))


def test_compares_status_names_the_settings():
    """The estimate, the first thing Compare shows (before any run), names the settings it will run."""
    from ui.compare_tab import run_compare
    running = run_compare("def f(x):", 8, 0.0, N=12, K=2, mu=0.1, shape_temperature=0.5)
    first = next(running)
    running.close()
    assert "TALON at preset embedded" in first["status"] and "SpecBound at preset paper" in first["status"]


def test_the_preview_is_watermarked_and_the_visitors_step_is_titled_as_theirs(monkeypatch):
    from tests.handler_helpers import step
    from ui import preview
    from ui.preview import preview_panels
    from ui.view_specs import VIEWS
    run = step(None)["run"]
    run.label = preview.LABEL
    monkeypatch.setattr(preview.PREVIEW, "runs", {"talon": run})
    preview.PREVIEW.ready.set()
    shown = preview_panels("talon", VIEWS["talon"].render)
    assert any(a.name == "preview" for a in shown["tree"].layout.annotations)
    assert "preview, computed at start-up" in shown["tree"].layout.title.text
    own = step(None)["tree"]
    assert not any(a.name == "preview" for a in own.layout.annotations)
    assert "your run · step 1" in own.layout.title.text.replace("<br>", " · ")
