"""Tune tab: a grid sweep of two knobs over a few prompts, scored by MAT and measured speed-up over AR.
Plain AR of each prompt is timed before and after the grid (averaged per position, as in Compare); a
cell's speed-up is AR's time over the cell's time for the same output positions, pooled over prompts."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

from core import knobs as core_knobs, server_flags
from core.metrics import Baseline, pooled_speedup
from ui.baseline import full_ar_pass, merged
from ui.config import RunConfig
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS, Knob, validate
from ui.run import Run

MAX_CELLS = 25
# Each sweep around the method's defaults (the paper preset); the last one sweeps our deviations from it.
SWEEPS = {
    "TALON: μ × N": ("talon", "mu", "N", "0.01, 0.03, 0.1, 0.2", "16, 32, 60, 96"),
    "SpecBound: α × τ_exit": ("specbound", "alpha", "tau_exit", "0, 0.25, 0.5, 1", "0.05, 0.1, 0.2"),
    "SpecBound: d_max × w_max": ("specbound", "d_max", "w_max", "2, 4, 6, 8", "2, 4, 8"),
    "SpecBound: V_exit × ℓ_min (ours)": ("specbound", "exit_vocab", "min_exit_layer", "0, 1024, 4096", "1, 2, 3"),
    "Static tree (SGLang's): D × K": ("static", "depth", "K", "2, 4, 6, 8", "2, 4, 10"),
    "Chain (vLLM's): γ": ("chain", "gamma", None, "1, 2, 3, 4, 6, 8", ""),
}
EXTRA_KNOBS = [core_knobs.DEPTH, core_knobs.GAMMA]  # swept, not on a stepping view


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
    return next(k for k in TALON_KNOBS + SPECBOUND_KNOBS + EXTRA_KNOBS if k.name == name)


def symbol(name: str | None) -> str:
    """The knob's paper symbol (μ, N, α, τ_exit, d_max, w_max) for labels and axes ('' for a 1-D sweep's y)."""
    return knob_spec(name).label.split(" ")[0] if name else ""


def parse_values(text: str, name: str) -> list[float]:
    """'0.01, 0.03' -> validated values for knob `name`."""
    spec = knob_spec(name)
    parts = [p for p in str(text).replace(";", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError(f"give at least one value for {spec.label}")
    return [validate([spec], {name: p.strip()})[name] for p in parts]


@dataclass
class Cell:
    """One grid cell: per prompt, each step's τ and decoding ms (prefill out)."""
    tokens: int
    steps: int
    runs: list[tuple[list[int], list[float]]]

    @property
    def mat(self) -> float:
        return self.tokens / max(1, self.steps)

    def speedup(self, bases: list[Baseline]) -> float | None:
        """AR ms over this cell's ms, same positions, pooled over prompts."""
        return pooled_speedup(self.runs, bases)


def measure(method: str, knobs: dict, prompts: list[str], cfg: RunConfig,
            check: Callable[[], None] | None = None) -> Cell:
    """One cell: every prompt to the end; `check` runs before each step (a cancelled sweep stops there)."""
    cell = Cell(0, 0, [])
    for prompt in prompts:
        r = Run(replace(cfg, method=method, prompt=prompt, knobs=tuple(knobs.items()))).to_end(check)
        cell.tokens, cell.steps = cell.tokens + len(r.output_ids), cell.steps + len(r.traces)
        cell.runs.append(([t.tau for t in r.traces], r.step_ms))
        r.forget()
    return cell


def cell_knobs(fixed: dict, x_name: str, x: float, y_name: str | None, y: float | None) -> dict:
    return {**fixed, x_name: x, **({y_name: y} if y_name else {})}


def best_cell(res: SweepResult) -> tuple[float, float | None] | None:
    """(x, y) of the fastest cell that finished, or None."""
    done = [(v, j, i) for i, row in enumerate(res.speedup) for j, v in enumerate(row) if v is not None]
    if not done:
        return None
    _, j, i = max(done)
    return res.xs[j], res.ys[i]


def server_settings(res: SweepResult, fixed: dict, drafter: str, draft: str) -> list[str]:
    """The fastest static tree as SGLang's flags, the fastest chain as vLLM's (core/server_flags.py): settings
    to take to a server; empty for other sweeps or before a cell finished."""
    best = best_cell(res) if res.method in ("static", "chain") else None
    if best is None:
        return []
    k = core_knobs.resolve(res.method, cell_knobs(fixed, res.x_name, best[0], res.y_name, best[1]))
    name = draft if draft not in ("", "embedded") else server_flags.PLACEHOLDERS.get(drafter, "DRAFT_ID")
    label = f"Tune's fastest cell, {res.method}"
    try:
        lines = (server_flags.static_lines(label, k["N"], k["K"], k["depth"], drafter, name) if res.method == "static"
                 else server_flags.chain_lines(label, k["gamma"], drafter, name))
    except ValueError as exc:  # the lookup drafter: no engine runs it
        return [str(exc)]
    return [*lines, server_flags.CONVENTIONS]


def grid(kind: str, x_text: str, y_text: str) -> tuple[str, str, str, list[float], list[float]]:
    """The sweep's method, knob names and checked values (at most MAX_CELLS cells)."""
    if kind not in SWEEPS:
        raise ValueError(f"unknown sweep '{kind}'")
    method, x_name, y_name, _, _ = SWEEPS[kind]
    xs, ys = parse_values(x_text, x_name), parse_values(y_text, y_name) if y_name else [None]
    if len(xs) * len(ys) > MAX_CELLS:
        raise ValueError(f"{len(xs)}×{len(ys)} cells is too many for a shared CPU; keep it to {MAX_CELLS}")
    return method, x_name, y_name, xs, ys


def parts(x_name: str, y_name: str, xs: list[float], ys: list[float]) -> list[str]:
    """What sweep() runs, in order, for the progress line."""
    cells = [f"{symbol(x_name)} = {x:g}" + (f", {symbol(y_name)} = {y:g}" if y_name else "") for y in ys for x in xs]
    return ["plain AR (before the grid)", *cells, "plain AR (after the grid)"]


def sweep(kind: str, x_text: str, y_text: str, prompts: list[str], cfg: RunConfig, fixed: dict,
          check: Callable[[], None] | None = None) -> Iterator[SweepResult]:
    """Yields the grid so far after the AR passes before it and after each cell, in parts() order
    (unfinished cells None, speed-ups against the passes before alone); the last result uses AR before and
    after, averaged. `check` runs before every engine step and may raise to stop (Cancel)."""
    method, x_name, y_name, xs, ys = grid(kind, x_text, y_text)

    def ar_passes() -> list[Baseline]:
        return [full_ar_pass(cfg.target, p, cfg.sampling, cfg.max_new_tokens, check).snapshot() for p in prompts]

    def result(bases: list[Baseline]) -> SweepResult:
        mat = [[None if c is None else c.mat for c in row] for row in cells]
        speed = [[None if c is None else c.speedup(bases) for c in row] for row in cells]
        return SweepResult(method, x_name, y_name, xs, ys, mat, speed)

    cells: list[list[Cell | None]] = [[None] * len(xs) for _ in ys]
    before = ar_passes()
    yield result(before)
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            cells[i][j] = measure(method, cell_knobs(fixed, x_name, x, y_name, y), prompts, cfg, check)
            yield result(before)
    yield result([merged(a, b) for a, b in zip(before, ar_passes())])
