"""The Tune tab, builder and handlers in one place: a grid sweep of two knobs over a few prompts (the grid and its
cells: ui/tune.py; the sweeps on offer: ui/sweeps.py), and this machine's cost curve under it.

Its public API endpoints (/sweep, /cost_curve) keep their positional order for existing callers: TUNE_INPUTS and
COST_INPUTS are that order, new inputs go at their ends, and a new output goes before the status, which stays
last."""
from __future__ import annotations

import time

import gradio as gr

from ui import learn
from ui.cost_view import cost_view
from ui.examples import example_prompts
from ui.handlers import friendly, make_config
from ui.jobs import LONG, Job, ar_ms_per_token, cancel, duration, long_run, session_key
from ui.models import DEFAULT_DRAFTER
from ui.preset_line import shared_with
from ui.run import Run
from ui.sweeps import SWEEPS, fixed_text, symbol
from ui.tune import MIN_RANK_TOKENS, grid, parts, server_settings, sweep
from ui.view_specs import drafter_input
from ui.wiring import named
from viz.cost_fig import cost_curve_figure
from viz.escape import esc
from viz.tune_figs import mat_heatmap, ranking_html, speedup_heatmap

TUNE_INPUTS = ("kind", "x_values", "y_values", "n_prompts", "max_new_tokens", "target", "draft", "drafter", "chat",
               "fixed", "vllm_version")
COST_INPUTS = ("run", "target", "draft", "drafter")


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
    job = Job(f"Tune: {len(g.xs) * len(g.ys)} cells and AR before the grid and after each row, each {n} prompt(s) "
              f"× up to {cfg.max_new_tokens} tokens", parts(g), n * cfg.max_new_tokens,
              ar_ms_per_token(cfg.target, prompts[0]))
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
               "speed-up draw against one of the AR passes timed before the grid and after each of its rows (the "
               "machine's drift over the whole grid included).")


def cancel_sweep(request: gr.Request = None) -> str:
    return cancel(request, "tune", "sweep")


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


def tune_tab(models: dict, talon_run: gr.State) -> dict:
    gr.Markdown("Sweep two knobs over a few example prompts (greedy), every other knob held as the *fixed knobs* "
                "box says. Each cell runs every prompt to the end; its speed-up comes with a range, and cells "
                "timed over too few tokens to rank say so.")
    first = SWEEPS[next(iter(SWEEPS))]
    c: dict = {**models, "run": talon_run}
    with gr.Row():
        c["kind"] = gr.Radio(list(SWEEPS), value=next(iter(SWEEPS)), label="sweep", elem_id="tune-kind")
        c["x_values"] = gr.Textbox(value=first.xs, label=f"{symbol(first.x)} values", elem_id="tune-x")
        c["y_values"] = gr.Textbox(value=first.ys, label=f"{symbol(first.y)} values", elem_id="tune-y")
    c["fixed"] = gr.Textbox(value=fixed_text(first.fixed), label="fixed knobs (held in every cell)",
                            elem_id="tune-fixed", info="name = value pairs, e.g. K = 2, T_shape = 0.5; empty: the "
                            "sweep's own; a knob left out takes the method's default (the summary lists every knob held)")
    with gr.Row():
        c["n_prompts"] = gr.Slider(1, 5, value=3, step=1, label="prompts", elem_id="tune-prompts")
        c["max_new_tokens"] = gr.Slider(8, 64, value=32, step=1, label="max new tokens", elem_id="tune-max-new")
        c["drafter"] = drafter_input("tune-drafter")
        c["vllm_version"] = gr.Textbox("", label="vLLM version (optional)", placeholder="e.g. 0.11.2",
                                       elem_id="tune-vllm-version", min_width=140,
                                       info="a chain sweep's vLLM settings are for this release; empty: the one "
                                            "they were checked against (named under the settings)")
        with gr.Column(min_width=160):
            go = gr.Button("Run sweep", variant="primary", elem_id="tune-run")
            stop = gr.Button("Cancel", elem_id="tune-cancel")
    c["status"] = gr.HTML(elem_id="tune-status", min_height=0)
    with gr.Row():
        c["mat"] = gr.Plot(show_label=False, elem_id="tune-mat")  # the figures' titles say what they are
        c["speedup"] = gr.Plot(show_label=False, elem_id="tune-speedup")
    c["summary"] = gr.HTML(elem_id="tune-summary", min_height=0)
    c["kind"].change(**named(sweep_defaults, ("kind",), ("x_values", "y_values", "fixed"), c), api_visibility="private")
    running = go.click(**named(run_sweep, TUNE_INPUTS, ("mat", "speedup", "summary", "status"), c), api_name="sweep",
                       show_progress="minimal", **LONG)
    stop.click(cancel_sweep, None, [c["status"]], cancels=[running], api_name="sweep_cancel")
    cost_block(c)
    return c


def cost_block(c: dict) -> None:
    """The cost curve under the sweep: shown as kept (measured when none is), or measured again now."""
    gr.Markdown("### This machine's cost curve\nHow long one target forward takes for n new tokens, measured here "
                "(kept a day per device, model and drafter, or until the machine changes; a measurement takes a few "
                "seconds; points a busy moment inflated are timed again), with the N your TALON run used marked, and "
                "the speed-up over AR modelled for that run at each budget N.")
    with gr.Row():
        show = gr.Button("Show the cost curve", elem_id="tune-cost-run")
        again = gr.Button("Measure it again now", elem_id="tune-cost-remeasure")
    c["curve"] = gr.Plot(show_label=False, elem_id="tune-cost")
    with gr.Accordion("Learn: why the best tree is small on a CPU and large on a GPU", open=False):
        gr.Markdown(learn.HARDWARE)
    show.click(**named(cost_curve, COST_INPUTS, ("curve",), c), api_name="cost_curve", **LONG)
    again.click(**named(remeasure_cost_curve, COST_INPUTS, ("curve",), c), api_name="cost_curve_remeasure", **LONG)
