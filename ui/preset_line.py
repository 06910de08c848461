"""One line above each stepping view, and in Compare's status: which preset the knobs are (by name, read from
core/knobs.PRESETS, so a retuned preset is named by what it now holds), the model it runs on, and how fast it
measured. The speed is data, never text: the run's own measured speed-up once it has one, else the entry
scripts/view_speed.py wrote for exactly these knobs, this model (and drafter) on this machine
(docs/bench/view_speed.json), with when and how it was measured, else a line saying it has not been measured
here yet. An entry that does not name its model, or was measured on another machine, claims nothing.

Why: three speed numbers stand side by side on the page, and Compare, Tune and the views each run their own
settings; a visitor should read what runs where, and which number was timed on what.

view_speed.json: {"machine": fingerprint("cpu"), "model": page name ("embedded", "smollm2", a Hub id),
"views": {view: [{"knobs", "speedup", "prompts", "max_new_tokens", "measured", "drafter" (TALON), ...}]}};
an entry's own "model" overrides the file's."""
from __future__ import annotations

import json
from pathlib import Path

from core import knobs as core_knobs
from core.model.cost_cache import fingerprint
from ui.models import DEFAULT_DRAFTER, EMBEDDED, default_model, model_label
from viz.escape import esc, num

BENCH = Path(__file__).resolve().parent.parent / "docs" / "bench" / "view_speed.json"
VIEW_METHOD = {"talon": "talon", "specbound": "specbound"}


def method_knobs(method: str, values: dict) -> dict:
    """The method's knobs from named page values (sliders, auto, exit layers), each checked as the engine
    would; a value the page does not hold takes its declared default."""
    given = {k.name: values.get(k.name) for k in core_knobs.METHOD_KNOBS[method]}
    if given.get("auto") is not None:
        given["auto"] = int(bool(given["auto"]))
    if isinstance(given.get("exit_layers"), str) and not given["exit_layers"].strip():
        given["exit_layers"] = None
    return core_knobs.resolve(method, given)


def preset_of(method: str, knobs: dict) -> str | None:
    """The preset these (resolved) knobs are, if one sets exactly them for this method."""
    for name in core_knobs.presets_for(method):
        if core_knobs.resolve(method, {"preset": name}) == knobs:
            return name
    return None


def shared_with(method: str, held: dict) -> str | None:
    """The first preset that holds these knobs at these values too (Tune's fixed knobs are only some of a
    method's), so a sweep can say whose settings it holds."""
    for name in core_knobs.presets_for(method):
        preset = core_knobs.resolve(method, {"preset": name})
        if held and all(k in preset and preset[k] == v for k, v in held.items()):
            return name
    return None


def knobs_text(method: str, knobs: dict) -> str:
    """'N=60 K=10 μ=0.03 k=1 T_shape=1': the method's knobs by their symbols (a static tree's D is not a TALON
    knob, so it is left out)."""
    shown = []
    for k in core_knobs.METHOD_KNOBS[method]:
        v = knobs.get(k.name)
        if k.name == "auto":
            shown += ["auto"] if v else []
        elif k.name == "exit_layers":
            shown.append(f"exit layers {v}")
        elif v is not None:
            shown.append(f"{k.symbol}={v:g}" if isinstance(v, float) else f"{k.symbol}={v}")
    return " ".join(shown)


def settings_text(method: str, knobs: dict) -> str:
    """'preset paper (N=60 …)' or 'your own settings (N=12 …)'."""
    name = preset_of(method, knobs)
    return f"{'preset ' + name if name else 'your own settings'} ({knobs_text(method, knobs)})"


def model_of(values: dict) -> str:
    """The target the view's next Step runs on: the page's target box ('' is the embedded pair, as make_config
    reads it), or, before the box is read, the model the page opens on."""
    if "target" not in values:
        return default_model()
    return (values.get("target") or "").strip() or EMBEDDED


def same_run(entry: dict, data: dict, model: str, drafter: str | None) -> bool:
    """The entry timed this model (and, for a drafting view, this drafter) on this machine."""
    named = entry.get("model", data.get("model"))
    ran = entry.get("drafter", data.get("drafter"))
    return named == model and data.get("machine") == fingerprint("cpu") and (drafter is None or ran == drafter)


def bench_entry(view: str, knobs: dict, path: Path = BENCH, model: str = EMBEDDED,
                drafter: str | None = None) -> dict | None:
    """The benchmark's entry for `view` at exactly these knobs (a preset retuned since is not these knobs), timed
    for this model and drafter on this machine; None when there is none."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    entries = (data.get("views") or {}).get(view) if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("knobs") == knobs and isinstance(entry.get("speedup"), (int, float)) \
                and same_run(entry, data, model, drafter):
            return {**entry, "machine": data.get("machine", "")}
    return None


def run_speed(run, knobs: dict, model: str = EMBEDDED, drafter: str | None = None) -> tuple[object, int] | None:
    """(the run's measured speed-up, its steps) when the run ran these knobs on this model and drafter and was
    timed here."""
    if run is None or not getattr(run, "traces", None) or getattr(run, "label", ""):
        return None
    cfg = run.config
    ran = {k: v for k, v in cfg.knobs}
    if method_knobs(cfg.method, ran) != knobs or (cfg.target or EMBEDDED) != model \
            or drafter is not None and cfg.drafter != drafter:
        return None
    stats = run.stats()
    return (stats.spread, stats.steps) if stats.spread is not None else None


def bench_text(entry: dict, drafter: str | None) -> str:
    """How and when the benchmark entry was measured, as HTML."""
    on = f", drafter {esc(drafter)}" if drafter else ""
    when = entry.get("measured") or "an unrecorded date"
    return (f"measured on a machine with this one's fingerprint ({esc(entry['machine'])}) on {esc(when)}: "
            f"<b>{num(entry['speedup'], '.2f', '×')}</b> over plain AR ({num(entry.get('prompts'), 'd')} prompts × "
            f"{num(entry.get('max_new_tokens'), 'd')} tokens, greedy{on}, by scripts/view_speed.py)")


def speed_text(view: str, knobs: dict, run=None, path: Path = BENCH, model: str = EMBEDDED,
               drafter: str | None = None) -> str:
    """Where the measured speed comes from, as HTML (every value escaped)."""
    own = run_speed(run, knobs, model, drafter)
    if own is not None:
        sp, steps = own
        spread = "" if sp.lo is None else f", range {num(sp.lo)}–{num(sp.hi)}"
        return (f"measured on this machine: <b>{num(sp.value, '.2f', '×')}</b> over plain AR (this run, "
                f"{num(steps, 'd')} step{'s' * (steps != 1)}{spread})")
    entry = bench_entry(view, knobs, path, model, drafter)
    if entry is not None:
        return bench_text(entry, drafter)
    return ("not measured on this machine yet for these knobs on this model: Step a few times and the measured "
            "speed-up appears here")


def running_html(view: str, values: dict, run=None, path: Path = BENCH) -> str:
    """The line above a stepping view: its preset (or own settings), the model it runs on and its measured speed."""
    method = VIEW_METHOD[view]
    knobs = method_knobs(method, values)
    model = model_of(values)
    drafter = (values.get("drafter") or DEFAULT_DRAFTER) if method == "talon" else None
    return (f'<div class="ss-running" role="status">This view runs {esc(settings_text(method, knobs))} on '
            f'{esc(model_label(model))} · {speed_text(view, knobs, run, path, model, drafter)}</div>')


def running_inputs(spec) -> tuple[str, ...]:
    """The page values the line reads: the view's sliders and whichever of auto / exit layers / drafter it has."""
    return tuple(k.name for k in spec.knobs) + tuple(c.name for c in spec.controls
                                                     if c.name in ("auto", "exit_layers", "drafter"))


def wire_running(spec, c: dict) -> None:
    """Redraw the line when a knob changes (a preset sets several) and after each step's stats."""
    import gradio as gr

    names = running_inputs(spec) + (("target",) if "target" in c else ())  # the model box: shared by the views

    def redraw(run, *values):
        return running_html(spec.name, dict(zip(names, values)), run)

    redraw.__name__ = f"{spec.name}_running"
    gr.on([c[n].change for n in names] + [c["stats"].change], redraw, [c["run"], *(c[n] for n in names)],
          [c["running"]], api_visibility="private", show_progress="hidden", trigger_mode="always_last",
          queue=False)
