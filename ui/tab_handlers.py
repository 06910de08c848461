"""Handlers for the Compare and Tune tabs and the model box (whole-run measurements, not stepping)."""
from __future__ import annotations

import time

import gradio as gr

from core import knobs as core_knobs
from ui.compare import PARTS, compare
from ui.examples import example_prompts
from ui.handlers import friendly, make_config
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS, preset_label
from ui.preset_line import method_knobs, settings_text, shared_with
from ui.cost_view import cost_view
from ui.models import DEFAULT_DRAFTER, EMBEDDED, pair_of
from ui.run import Run
from ui.worker import load_pair
from ui.jobs import JOBS, Cancelled, Job, ar_ms_per_token, duration
from ui.sweeps import SWEEPS, fixed_text, symbol
from ui.tune import MIN_RANK_TOKENS, grid, parts, server_settings, sweep
from viz.cost_fig import cost_curve_figure
from viz.escape import esc
from viz.html import compare_cards
from viz.tune_figs import compare_bars, mat_heatmap, ranking_html, speedup_heatmap

DEFAULT_KNOBS = {**{k.name: k.default for m in ("talon", "specbound") for k in core_knobs.METHOD_KNOBS[m]
                    if k.name != "auto"}, "gamma": 5, "depth": 8}  # every knob the methods read, auto aside
# Compare's settings: the TALON and SpecBound views' own knobs (the default: Compare starts from what the views
# run), the papers' presets, or those measured best on this CPU (the embedded tree, SpecBound fast)
SPECBOUND_WITH = {"paper": "paper", "embedded": "fast"}
VIEW = "view"
TREE_SETTINGS = {VIEW: "the TALON and SpecBound views' knobs, as set there now",
                 **{name: f"{preset_label(name)}; SpecBound {SPECBOUND_WITH[name]}" for name in ("paper", "embedded")}}
VIEW_KNOBS = tuple(k.name for k in TALON_KNOBS) + ("auto",) + tuple(k.name for k in SPECBOUND_KNOBS) + ("exit_layers",)


def compare_knobs(trees: str, view: dict | None = None) -> dict:
    """Every method's knobs for Compare: the defaults, with static's and TALON's from the chosen preset (or the
    TALON view's knobs) and SpecBound's from its counterpart (paper, fast beside the embedded tree, or the
    SpecBound view's knobs). `view`: the views' values by name (those missing take their defaults)."""
    if trees not in TREE_SETTINGS:
        raise ValueError(f"unknown tree settings {trees!r} (choose from {', '.join(TREE_SETTINGS)})")
    if trees == VIEW:
        view = view or {}
        talon = method_knobs("talon", view)
        talon.pop("auto")  # Compare's trees run at a fixed N; auto is the TALON view's own
        return {**DEFAULT_KNOBS, **talon, **method_knobs("specbound", view)}
    specbound = core_knobs.resolve("specbound", {"preset": SPECBOUND_WITH[trees]})
    return {**DEFAULT_KNOBS, **core_knobs.preset_knobs(trees), **specbound}


def compare_settings(knobs: dict) -> str:
    """What Compare ran, in words: the trees' preset (or own settings) and SpecBound's."""
    talon = core_knobs.resolve("talon", {k: v for k, v in knobs.items() if k != "auto"})
    specbound = core_knobs.resolve("specbound", knobs)
    return (f"static and TALON at {settings_text('talon', talon)} (static D = {knobs['depth']}), SpecBound at "
            f"{settings_text('specbound', specbound)}, chain γ = {knobs['gamma']}")


COMPARE_HEADERS = ["method", "MAT", "mean δ", "tokens/s", "speed-up", "lossless", "text"]


def choose_pair(target: str) -> tuple:
    """A pair from the model menu fills the target and draft boxes, the eagle3 drafter in every tab and chat
    auto; the embedded pair puts the embedded models back."""
    pair = pair_of(target)
    head = pair.head if pair is not None else EMBEDDED
    return (target if pair is not None else EMBEDDED, head, "auto", *([DEFAULT_DRAFTER if pair is None else "eagle3"] * 3))


@friendly
def load_models(target: str, draft: str) -> str:
    """Validate and load the chosen pair now, so the first Step does not pay for it."""
    return load_pair(target, draft)


def session_key(request: gr.Request | None, tab: str) -> str | None:
    """A browser session's Compare or Tune run (both may run at once, each with its own Cancel)."""
    hash_ = getattr(request, "session_hash", None) if request is not None else None
    return f"{hash_}:{tab}" if hash_ else None


def long_run(job: Job, key: str | None, parts, show, footer=None):
    """Drive a Compare or Tune generator: yield its outputs by name (`show(partial result)`) and a status line,
    the estimate first, then after each part with the time left; on Cancel, the parts that finished and a
    line saying so. `footer(last result)`: HTML under the final status line (Tune's server settings)."""
    JOBS.start(key, job)
    shown, last = {}, None
    yield {"status": job.status()}
    try:
        for partial in parts(job.check):
            job.done += 1
            shown, last = show(partial), partial
            yield {**shown, "status": job.status()}
        yield {**shown, "status": job.ended(cancelled=False) + (footer(last) if footer and last is not None else "")}
    except Cancelled:
        yield {**shown, "status": job.ended(cancelled=True) + (footer(last) if footer and last is not None else "")}
    finally:
        JOBS.finish(key, job)


def compare_outputs(rows: list) -> dict:
    bars = [{"method": r.method, "mat": r.mat, "speedup": r.speedup, "lo": r.lo, "hi": r.hi} for r in rows
            if r.mat is not None]
    return {"table": [r.as_row() for r in rows], "plot": compare_bars(bars),
            "cards": compare_cards(COMPARE_HEADERS, [r.as_row() for r in rows])}


@friendly
def run_compare(prompt: str, max_new_tokens: int, temperature: float, target: str = "embedded",
                draft: str = "embedded", drafter: str = DEFAULT_DRAFTER, trees: str = VIEW, chat: str = "auto",
                *view_values, request: gr.Request = None, **view_knobs):
    """Every method on one prompt (chain γ = 5; static and TALON at the `trees` setting: the views' own knobs,
    given after `chat` in VIEW_KNOBS order or by name, else their defaults; or the paper or embedded preset);
    chain, static and TALON draft with `drafter`. A generator of outputs by name (table, plot, status): the
    estimate first, naming the settings, then the table after each run (Cancel keeps it)."""
    view = {**dict(zip(VIEW_KNOBS, view_values)), **view_knobs}
    knobs = compare_knobs(trees, {k: v for k, v in view.items() if v is not None})
    cfg = make_config("ar", prompt, {}, [], {"temperature": temperature, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft, drafter, chat=chat)
    job = Job(f"Compare ({compare_settings(knobs)}): {len(PARTS)} runs of up to {cfg.max_new_tokens} tokens", PARTS,
              cfg.max_new_tokens, ar_ms_per_token(cfg.target, cfg.prompt))
    yield from long_run(job, session_key(request, "compare"), lambda check: compare(cfg, knobs, check),
                        compare_outputs)


def sweep_defaults(kind: str) -> dict:
    """A sweep chosen on the page: its values and its fixed knobs fill the boxes (by name)."""
    if kind not in SWEEPS:
        raise gr.Error(f"unknown sweep '{esc(kind)}'")
    s = SWEEPS[kind]
    y_box = (gr.Textbox(value=s.ys, label=f"{symbol(s.y)} values", interactive=True) if s.y else
             gr.Textbox(value="", label="(one knob: no second axis)", interactive=False))
    fixed = fixed_text(s.fixed)
    return {"x_values": gr.Textbox(value=s.xs, label=f"{symbol(s.x)} values"), "y_values": y_box,
            "fixed": gr.Textbox(value=fixed, interactive=bool(fixed),
                                placeholder="" if fixed else "nothing else to hold: the chain's one knob is swept")}


def tune_label(g, cfg, n: int, held: str) -> str:
    """The heatmaps' title after the measure's name: the method, then what ran and what was held, escaped."""
    on = f" on {cfg.drafter}" if g.method in ("chain", "static", "talon") else ""
    runs = f"{n} prompt(s) × {cfg.max_new_tokens} tokens, greedy"
    preset = shared_with(g.method, g.held)
    held = f"{held} (as preset {preset})" if held and preset else held
    return esc(f"{g.method.upper()}{on}") + f"<br><sub>{esc(runs)}" + (f"<br>held: {esc(held)}" if held else "") + \
        "</sub>"


@friendly
def run_sweep(kind: str, x_values: str, y_values: str, n_prompts: int = 3, max_new_tokens: int = 32,
              target: str = "embedded", draft: str = "embedded", drafter: str = DEFAULT_DRAFTER, chat: str = "auto",
              fixed: str = "", vllm_version: str = "", request: gr.Request = None):
    """A generator like run_compare: the estimate, then both heatmaps and the ranking after each cell.
    `fixed`: the knobs held, 'K = 2, T_shape = 0.5' (empty: the sweep's own, ui/sweeps.py); `vllm_version`: the
    vLLM release a chain's settings are for (empty: the one they were checked against)."""
    n = int(n_prompts)
    if not 1 <= n <= 5:
        raise ValueError("use between 1 and 5 prompts")
    prompts = list(example_prompts()[:n])
    cfg = make_config("ar", prompts[0], {}, [], {"temperature": 0.0, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft, drafter, chat=chat)
    g = grid(kind, x_values, y_values, fixed if str(fixed or "").strip() else None)
    job = Job(f"Tune: {len(g.xs) * len(g.ys)} cells and AR before and after, each {n} prompt(s) × up to "
              f"{cfg.max_new_tokens} tokens", parts(g), n * cfg.max_new_tokens, ar_ms_per_token(cfg.target, prompts[0]))
    held = fixed_text(g.held)
    label, x, y = tune_label(g, cfg, n, held), symbol(g.x_name), symbol(g.y_name)

    def shown(res) -> dict:
        return {"mat": mat_heatmap(g.xs, g.ys, res.scores, f"MAT · {label}", x, y),
                "speedup": speedup_heatmap(g.xs, g.ys, res.scores, f"speed-up over AR · {label}", x, y),
                "summary": ranking_html(res.ranked(), res.few, MIN_RANK_TOKENS, held, SPREAD_NOTE)}

    def flags(res) -> str:
        try:
            lines = server_settings(res, cfg.drafter, cfg.draft, vllm_version or "")
        except ValueError as exc:  # a vLLM version that is not one: the sweep's results stay
            lines = [str(exc)]
        return f'<pre class="ss-flags">{esc(chr(10).join(lines))}</pre>' if lines else ""

    yield from long_run(job, session_key(request, "tune"), lambda check: sweep(g, prompts, cfg, check), shown,
                        footer=flags)


SPREAD_NOTE = ("Ranges: the 10th–90th percentile of a cell's value over 200 resamplings of its steps, each "
               "speed-up draw against AR timed before or after the grid (the machine's drift included).")


def cancel(request: gr.Request | None, tab: str) -> str:
    job = JOBS.cancel(session_key(request, tab))
    if job is None:
        return '<div class="ss-budget" role="status">Nothing to cancel.</div>'
    return job.ended(cancelled=True)


def cancel_compare(request: gr.Request = None) -> str:
    """Cancel: this session's Compare stops before its next engine step; what finished stays."""
    return cancel(request, "compare")


def cancel_sweep(request: gr.Request = None) -> str:
    return cancel(request, "tune")


def cost_figure(run: Run | None, target: str, draft: str, drafter: str, fresh: bool) -> dict:
    v = cost_view(run, target, draft, drafter, fresh)
    return {"curve": cost_curve_figure(v.cost.verify_n, v.cost.verify_ms, v.chosen_n, v.speedup, cost_title(v.cost),
                                       v.note, retimed=v.cost.retimed, flag=v.cost.flag)}


@friendly
def cost_curve(run: Run | None, target: str = "embedded", draft: str = "embedded", drafter: str = DEFAULT_DRAFTER):
    """{'curve': this machine's t_verify(n) with the TALON run's N marked and its modelled speed-up over N} (the
    run's own target and drafter when there is a run, else the Tune tab's choice), as kept (measured if none is)."""
    return cost_figure(run, target, draft, drafter, fresh=False)


@friendly
def remeasure_cost_curve(run: Run | None, target: str = "embedded", draft: str = "embedded",
                         drafter: str = DEFAULT_DRAFTER):
    """The cost curve measured again now, whatever is kept in memory or on disk (the button beside it)."""
    return cost_figure(run, target, draft, drafter, fresh=True)


def cost_title(cost) -> str:
    """Where and when the curve was measured, so a stale or loaded-machine curve can be recognised."""
    device, *_, dtype, identity = cost.key.split("|")  # device | model | dtype | drafter identity (kind:weights)
    kind = identity.split(":")[0]
    age = time.time() - cost.measured_at
    when = f"measured {duration(age)} ago" if cost.measured_at else "measured earlier"
    return f"Cost curve of this machine ({device}, {dtype.replace('torch.', '')}, drafter {kind}; {when})"
