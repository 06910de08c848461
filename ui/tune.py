"""Tune tab: a grid sweep of two knobs over a few prompts, scored by MAT and measured speed-up over AR
(tokens and seconds pooled over the prompts, one shared AR baseline per prompt)."""
from __future__ import annotations

import time
from dataclasses import dataclass

from core.engine import Session
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS, Knob, validate
from ui.models import get_models
from ui.run import RunConfig, baseline_for, build

MAX_CELLS = 25
SWEEPS = {
    "TALON: μ × N": ("talon", "mu", "N", "0.01, 0.03, 0.1, 0.2", "16, 32, 60, 96"),
    "SpecBound: α × τ_exit": ("specbound", "alpha", "tau_exit", "0, 0.5, 1, 2", "0.7, 0.8, 0.9"),
    "SpecBound: d_max × w_max": ("specbound", "d_max", "w_max", "2, 4, 6, 8", "2, 4, 8"),
}


@dataclass
class SweepResult:
    method: str
    x_name: str
    y_name: str
    xs: list[float]
    ys: list[float]
    mat: list[list[float | None]]  # [y][x]
    speedup: list[list[float | None]]


def knob_spec(name: str) -> Knob:
    return next(k for k in TALON_KNOBS + SPECBOUND_KNOBS if k.name == name)


def symbol(name: str) -> str:
    """The knob's paper symbol (μ, N, α, τ_exit, d_max, w_max) for labels and axes."""
    return knob_spec(name).label.split(" ")[0]


def parse_values(text: str, name: str) -> list[float]:
    """'0.01, 0.03' -> validated values for knob `name`."""
    spec = knob_spec(name)
    parts = [p for p in str(text).replace(";", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError(f"give at least one value for {spec.label}")
    return [validate([spec], {name: p.strip()})[name] for p in parts]


def measure(method: str, knobs: dict, prompts: list[str], cfg: RunConfig) -> tuple[float, float]:
    """(MAT, speed-up) pooled over prompts."""
    m = build(method, knobs)
    target, draft = get_models(cfg.target, cfg.draft, m.needs_draft)
    tokens = steps = 0
    secs = base_tokens = base_secs = 0.0
    for prompt in prompts:
        s = Session(target, m, prompt, cfg.sampling, cfg.max_new_tokens, draft)
        t0 = time.perf_counter()
        res = s.generate()
        secs += time.perf_counter() - t0 - s.prefill_ms / 1000
        tokens, steps = tokens + len(res.output_ids), steps + res.steps
        base = baseline_for(cfg.target, prompt, cfg.temperature, cfg.seed, cfg.max_new_tokens)
        base_tokens, base_secs = base_tokens + len(base.output_ids), base_secs + base.wall_s
    return tokens / max(1, steps), (tokens / secs) / (base_tokens / base_secs)


def sweep(kind: str, x_text: str, y_text: str, prompts: list[str], cfg: RunConfig, fixed: dict,
          progress=None) -> SweepResult:
    if kind not in SWEEPS:
        raise ValueError(f"unknown sweep '{kind}'")
    method, x_name, y_name, _, _ = SWEEPS[kind]
    xs, ys = parse_values(x_text, x_name), parse_values(y_text, y_name)
    if len(xs) * len(ys) > MAX_CELLS:
        raise ValueError(f"{len(xs)}×{len(ys)} cells is too many for a shared CPU; keep it to {MAX_CELLS}")
    mat = [[None] * len(xs) for _ in ys]
    speed = [[None] * len(xs) for _ in ys]
    total, done = len(xs) * len(ys), 0
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            if progress is not None:
                progress((done, total), desc=f"{x_name}={x:g}, {y_name}={y:g}")
            mat[i][j], speed[i][j] = measure(method, {**fixed, x_name: x, y_name: y}, prompts, cfg)
            done += 1
    return SweepResult(method, x_name, y_name, xs, ys, mat, speed)
