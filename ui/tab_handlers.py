"""Handlers for the Compare and Tune tabs and the model box (whole-run measurements, not stepping)."""
from __future__ import annotations

import gradio as gr

from ui.compare import compare
from ui.examples import example_prompts
from ui.handlers import friendly, make_config
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS
from ui.models import get_models
from ui.tune import SWEEPS, sweep, symbol
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
                draft: str = "embedded", progress=gr.Progress()) -> tuple:
    """Every method on one prompt at SPEC defaults (chain γ = 5, static D = 8)."""
    cfg = make_config("ar", prompt, {}, [], {"temperature": temperature, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft)
    rows = compare(cfg, DEFAULT_KNOBS, progress)
    fig = compare_bars([{"method": r.method, "mat": r.mat, "speedup": r.speedup} for r in rows if r.mat is not None])
    return [r.as_row() for r in rows], fig


def sweep_defaults(kind: str) -> tuple:
    _, x_name, y_name, xs, ys = SWEEPS[kind]
    return gr.Textbox(value=xs, label=f"{symbol(x_name)} values"), gr.Textbox(value=ys, label=f"{symbol(y_name)} values")


@friendly
def run_sweep(kind: str, x_text: str, y_text: str, n_prompts: int, max_new_tokens: int, target: str = "embedded",
              draft: str = "embedded", progress=gr.Progress()) -> tuple:
    n = int(n_prompts)
    if not 1 <= n <= 5:
        raise ValueError("use between 1 and 5 prompts")
    prompts = list(example_prompts()[:n])
    cfg = make_config("ar", prompts[0], {}, [], {"temperature": 0.0, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft)
    res = sweep(kind, x_text, y_text, prompts, cfg, DEFAULT_KNOBS, progress)
    label = f"{res.method.upper()} on {n} prompt(s), {cfg.max_new_tokens} tokens, greedy"
    x, y = symbol(res.x_name), symbol(res.y_name)
    return (sweep_heatmap(res.xs, res.ys, res.mat, f"MAT · {label}", x, y),
            sweep_heatmap(res.xs, res.ys, res.speedup, f"speed-up over AR · {label}", x, y))
