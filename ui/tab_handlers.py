"""Handlers for the Compare and Tune tabs and the model box (whole-run measurements, not stepping)."""
from __future__ import annotations

import gradio as gr

from ui.compare import compare
from ui.examples import example_prompts
from ui.handlers import friendly, make_config
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS
from ui.cost_view import cost_view
from ui.models import DEFAULT_DRAFTER, get_models
from ui.run import Run
from ui.tune import SWEEPS, sweep, symbol
from viz.cost_fig import cost_curve_figure
from viz.outcome_figs import compare_bars, sweep_heatmap

DEFAULT_KNOBS = {**{k.name: k.default for k in TALON_KNOBS + SPECBOUND_KNOBS}, "gamma": 5, "depth": 8}
COMPARE_HEADERS = ["method", "MAT", "mean δ", "tokens/s", "speed-up", "lossless", "text"]


@friendly
def load_models(target: str, draft: str) -> str:
    """Validate and load the chosen pair now, so the first Step does not pay for it."""
    t, d = get_models(target, draft, needs_draft=True)
    return (f"Loaded target '{target or 'embedded'}' ({t.num_layers} layers, {len(t.tokenizer)} tokens) and "
            f"draft '{draft or 'embedded'}' ({d.num_layers} layers), on {t.device}.")


@friendly
def run_compare(prompt: str, max_new_tokens: int, temperature: float, target: str = "embedded",
                draft: str = "embedded", drafter: str = DEFAULT_DRAFTER, progress=gr.Progress()) -> tuple:
    """Every method on one prompt at SPEC defaults (chain γ = 5, static D = 8); chain, static and TALON
    draft with `drafter`."""
    cfg = make_config("ar", prompt, {}, [], {"temperature": temperature, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft, drafter)
    rows = compare(cfg, DEFAULT_KNOBS, progress)
    fig = compare_bars([{"method": r.method, "mat": r.mat, "speedup": r.speedup} for r in rows if r.mat is not None])
    return [r.as_row() for r in rows], fig


def sweep_defaults(kind: str) -> tuple:
    _, x_name, y_name, xs, ys = SWEEPS[kind]
    return gr.Textbox(value=xs, label=f"{symbol(x_name)} values"), gr.Textbox(value=ys, label=f"{symbol(y_name)} values")


@friendly
def run_sweep(kind: str, x_text: str, y_text: str, n_prompts: int, max_new_tokens: int, target: str = "embedded",
              draft: str = "embedded", drafter: str = DEFAULT_DRAFTER, progress=gr.Progress()) -> tuple:
    n = int(n_prompts)
    if not 1 <= n <= 5:
        raise ValueError("use between 1 and 5 prompts")
    prompts = list(example_prompts()[:n])
    cfg = make_config("ar", prompts[0], {}, [], {"temperature": 0.0, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft, drafter)
    res = sweep(kind, x_text, y_text, prompts, cfg, DEFAULT_KNOBS, progress)
    on = f" on {cfg.drafter}" if res.method == "talon" else ""
    label = f"{res.method.upper()}{on}, {n} prompt(s), {cfg.max_new_tokens} tokens, greedy"
    x, y = symbol(res.x_name), symbol(res.y_name)
    return (sweep_heatmap(res.xs, res.ys, res.mat, f"MAT · {label}", x, y),
            sweep_heatmap(res.xs, res.ys, res.speedup, f"speed-up over AR · {label}", x, y))


@friendly
def cost_curve(run: Run | None, target: str = "embedded", draft: str = "embedded",
               drafter: str = DEFAULT_DRAFTER):
    """This machine's t_verify(n) with the TALON run's N marked and its modelled speed-up over N (the run's
    own target and drafter when there is a run, else the Tune tab's choice)."""
    v = cost_view(run, target, draft, drafter)
    parts = v.cost.key.split("|")  # device | model | dtype | drafter
    device, dtype, kind = parts[0], parts[-2], parts[-1]
    title = f"Cost curve of this machine ({device}, {dtype.replace('torch.', '')}, drafter {kind})"
    return cost_curve_figure(v.cost.verify_n, v.cost.verify_ms, v.chosen_n, v.speedup, title, v.note)
