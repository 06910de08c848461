"""Handlers for the Compare and Tune tabs and the model box (whole-run measurements, not stepping)."""
from __future__ import annotations

import gradio as gr

from core import knobs as core_knobs
from ui.compare import PARTS, compare
from ui.examples import example_prompts
from ui.handlers import friendly, make_config
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS, preset_label
from ui.cost_view import cost_view
from ui.models import DEFAULT_DRAFTER, EMBEDDED, pair_of
from ui.run import Run
from ui.worker import load_pair
from ui.jobs import JOBS, Cancelled, Job, ar_ms_per_token
from ui.tune import SWEEPS, grid, parts, server_settings, sweep, symbol
from viz.cost_fig import cost_curve_figure
from viz.escape import esc
from viz.outcome_figs import compare_bars, sweep_heatmap

DEFAULT_KNOBS = {**{k.name: k.default for k in TALON_KNOBS + SPECBOUND_KNOBS}, "gamma": 5, "depth": 8}
# Compare's settings: the papers' presets, or those measured best on this CPU (the embedded tree, SpecBound fast)
SPECBOUND_WITH = {"paper": "paper", "embedded": "fast"}
TREE_SETTINGS = {name: f"{preset_label(name)}; SpecBound {SPECBOUND_WITH[name]}" for name in ("paper", "embedded")}


def compare_knobs(trees: str) -> dict:
    """Every method's knobs for Compare: the defaults, with static's and TALON's from the chosen preset and
    SpecBound's from its counterpart (paper, or fast beside the embedded tree)."""
    if trees not in TREE_SETTINGS:
        raise ValueError(f"unknown tree settings {trees!r} (choose from {', '.join(TREE_SETTINGS)})")
    specbound = core_knobs.resolve("specbound", {"preset": SPECBOUND_WITH[trees]})
    return {**DEFAULT_KNOBS, **core_knobs.preset_knobs(trees), **specbound}


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


def long_run(job: Job, key: str | None, parts, show, n: int, footer=None):
    """Drive a Compare or Tune generator: yield its `n` outputs (`show(partial result)`) and a status line,
    the estimate first, then after each part with the time left; on Cancel, the parts that finished and a
    line saying so. `footer(last result)`: HTML under the final status line (Tune's server settings)."""
    JOBS.start(key, job)
    shown, last = (gr.skip(),) * n, None
    yield shown + (job.status(),)
    try:
        for partial in parts(job.check):
            job.done += 1
            shown, last = show(partial), partial
            yield shown + (job.status(),)
        yield shown + (job.ended(cancelled=False) + (footer(last) if footer and last is not None else ""),)
    except Cancelled:
        yield shown + (job.ended(cancelled=True) + (footer(last) if footer and last is not None else ""),)
    finally:
        JOBS.finish(key, job)


def compare_outputs(rows: list) -> tuple:
    fig = compare_bars([{"method": r.method, "mat": r.mat, "speedup": r.speedup} for r in rows if r.mat is not None])
    return [r.as_row() for r in rows], fig


@friendly
def run_compare(prompt: str, max_new_tokens: int, temperature: float, target: str = "embedded",
                draft: str = "embedded", drafter: str = DEFAULT_DRAFTER, trees: str = "paper", chat: str = "auto",
                request: gr.Request = None):
    """Every method on one prompt (chain γ = 5; static and TALON at the `trees` preset: paper or embedded);
    chain, static and TALON draft with `drafter`. A generator: the estimate first, then the table after each
    run (Cancel keeps it)."""
    knobs = compare_knobs(trees)
    cfg = make_config("ar", prompt, {}, [], {"temperature": temperature, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft, drafter, chat=chat)
    job = Job(f"Compare: {len(PARTS)} runs of up to {cfg.max_new_tokens} tokens", PARTS, cfg.max_new_tokens,
              ar_ms_per_token(cfg.target, cfg.prompt))
    yield from long_run(job, session_key(request, "compare"), lambda check: compare(cfg, knobs, check),
                        compare_outputs, 2)


def sweep_defaults(kind: str) -> tuple:
    _, x_name, y_name, xs, ys = SWEEPS[kind]
    y_box = (gr.Textbox(value=ys, label=f"{symbol(y_name)} values", interactive=True) if y_name else
             gr.Textbox(value="", label="(one knob: no second axis)", interactive=False))
    return gr.Textbox(value=xs, label=f"{symbol(x_name)} values"), y_box


@friendly
def run_sweep(kind: str, x_text: str, y_text: str, n_prompts: int, max_new_tokens: int, target: str = "embedded",
              draft: str = "embedded", drafter: str = DEFAULT_DRAFTER, chat: str = "auto", request: gr.Request = None):
    """A generator like run_compare: the estimate, then both heatmaps after each cell."""
    n = int(n_prompts)
    if not 1 <= n <= 5:
        raise ValueError("use between 1 and 5 prompts")
    prompts = list(example_prompts()[:n])
    cfg = make_config("ar", prompts[0], {}, [], {"temperature": 0.0, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft, drafter, chat=chat)
    method, x_name, y_name, xs, ys = grid(kind, x_text, y_text)
    job = Job(f"Tune: {len(xs) * len(ys)} cells and AR before and after, each {n} prompt(s) × up to "
              f"{cfg.max_new_tokens} tokens", parts(x_name, y_name, xs, ys), n * cfg.max_new_tokens,
              ar_ms_per_token(cfg.target, prompts[0]))
    on = f" on {cfg.drafter}" if method == "talon" else ""
    label = f"{method.upper()}{on}, {n} prompt(s), {cfg.max_new_tokens} tokens, greedy"
    x, y = symbol(x_name), symbol(y_name)

    def heatmaps(res) -> tuple:
        return (sweep_heatmap(res.xs, res.ys, res.mat, f"MAT · {label}", x, y),
                sweep_heatmap(res.xs, res.ys, res.speedup, f"speed-up over AR · {label}", x, y))

    def flags(res) -> str:
        lines = server_settings(res, DEFAULT_KNOBS, cfg.drafter, cfg.draft)
        return f'<pre class="ss-flags">{esc(chr(10).join(lines))}</pre>' if lines else ""

    yield from long_run(job, session_key(request, "tune"),
                        lambda check: sweep(kind, x_text, y_text, prompts, cfg, DEFAULT_KNOBS, check),
                        heatmaps, 2, footer=flags)


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


@friendly
def cost_curve(run: Run | None, target: str = "embedded", draft: str = "embedded",
               drafter: str = DEFAULT_DRAFTER):
    """This machine's t_verify(n) with the TALON run's N marked and its modelled speed-up over N (the run's
    own target and drafter when there is a run, else the Tune tab's choice)."""
    v = cost_view(run, target, draft, drafter)
    parts = v.cost.key.split("|")  # device | model | dtype | drafter identity (kind:weights)
    device, dtype, kind = parts[0], parts[-2], parts[-1].split(":")[0]
    title = f"Cost curve of this machine ({device}, {dtype.replace('torch.', '')}, drafter {kind})"
    return cost_curve_figure(v.cost.verify_n, v.cost.verify_ms, v.chosen_n, v.speedup, title, v.note)
