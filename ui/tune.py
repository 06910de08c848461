"""Tune's grid (the tab: ui/tune_tab.py): a sweep of two knobs over a few prompts, scored by MAT and measured speed-up
over AR, each cell with its range. Plain AR of each prompt is timed before the grid and after each of its rows; a
cell's speed-up is AR's time over the cell's for the same output positions, pooled over prompts, and its range
resamples the cell's steps against one of those passes drawn at random (core/metrics.pooled_spread), so it covers
the steps' noise and the machine's drift over the whole grid, not only between its two ends (two identical Tunes
gave one cell 1.03× (0.53–1.64) then 2.23× (1.90–2.54) with AR timed before and after alone). What sweeps exist
and what they hold fixed: ui/sweeps.py."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

from core import knobs as core_knobs, server_flags
from core.metrics import Baseline, bootstrap, pooled_spread
from ui.baseline import full_ar_pass
from ui.config import RunConfig
from ui.run import Run
from ui.sweeps import NOT_FIXED, SWEEPS, parse_fixed, parse_values, symbol
from viz.tune_figs import CellScore, Ranked

MAX_CELLS = 25
# Why 64: below about a dozen steps a resampled range says little, and on a shared CPU one slow step moves a
# cell by more than the gaps between neighbouring settings; the grids in docs/bench/ time 12 prompts × 64 tokens.
MIN_RANK_TOKENS = 64
WARM_TOKENS = 8  # untimed tokens before the grid (warm_up)


@dataclass(frozen=True)
class Grid:
    """A sweep as asked: the method, the swept knobs and values, and every other knob as held."""
    method: str
    x_name: str
    y_name: str | None
    xs: list[float]
    ys: list[float | None]
    held: dict  # the method's other knobs, as the runs get them (the page's fixed box over the defaults)

    def knobs(self, x: float, y: float | None) -> dict:
        return {**self.held, self.x_name: x, **({self.y_name: y} if self.y_name else {})}

    def label(self, x: float, y: float | None) -> str:
        return f"{symbol(self.x_name)} = {x:g}" + (f", {symbol(self.y_name)} = {y:g}" if self.y_name else "")


@dataclass
class Cell:
    """One grid cell: per prompt, each step's τ and decoding ms (prefill out)."""
    runs: list[tuple[list[int], list[float]]]

    @property
    def tokens(self) -> int:
        return sum(sum(taus) for taus, _ in self.runs)

    def score(self, passes: list[list[Baseline]]) -> CellScore:
        """MAT and the speed-up against the AR passes so far, each with its range."""
        taus = [t for ts, _ in self.runs for t in ts]
        mat = self.tokens / max(1, len(taus))
        mat_range = bootstrap([taus], lambda picks: sum(picks) / len(picks))
        return CellScore(mat, mat_range, pooled_spread(self.runs, passes), self.tokens, self.tokens < MIN_RANK_TOKENS)


@dataclass
class SweepResult:
    grid: Grid
    scores: list[list[CellScore | None]]  # [y][x]; None: not measured yet

    def ranked(self) -> list[Ranked]:
        g = self.grid
        return [Ranked(g.label(x, y), c.speedup) for y, row in zip(g.ys, self.scores) for x, c in zip(g.xs, row)
                if c is not None and c.speedup is not None]

    @property
    def few(self) -> int:
        return sum(c.few for row in self.scores for c in row if c is not None)


def measure_cell(method: str, knobs: dict, prompts: list[str], cfg: RunConfig,
            check: Callable[[], None] | None = None) -> Cell:
    """One cell: every prompt to the end; `check` runs before each step (a cancelled sweep stops there)."""
    cell = Cell([])
    for prompt in prompts:
        r = Run(replace(cfg, method=method, prompt=prompt, knobs=tuple(knobs.items()))).to_end(check)
        cell.runs.append(([t.tau for t in r.traces], r.step_ms))
        r.forget()
    return cell


def best_cell(res: SweepResult) -> tuple[float, float | None] | None:
    """(x, y) of the fastest cell that finished, or None."""
    done = [(c.speedup.value, j, i) for i, row in enumerate(res.scores) for j, c in enumerate(row)
            if c is not None and c.speedup is not None]
    if not done:
        return None
    _, j, i = max(done)
    return res.grid.xs[j], res.grid.ys[i]


def server_settings(res: SweepResult, drafter: str, draft: str, vllm_version: str = "") -> list[str]:
    """The fastest static tree as SGLang's flags, the fastest chain as vLLM's (core/server_flags.py): settings
    to take to a server; empty for other sweeps or before a cell finished. `vllm_version`: the vLLM release the
    user targets ('' : the one the export was checked against)."""
    g = res.grid
    best = best_cell(res) if g.method in ("static", "chain") else None
    if best is None:
        return []
    k = core_knobs.resolve(g.method, g.knobs(*best))
    name = draft if draft not in ("", "embedded") else server_flags.PLACEHOLDERS.get(drafter, "DRAFT_ID")
    label = f"Tune's fastest cell, {g.method}"
    try:
        lines = (server_flags.static_lines(label, k["N"], k["K"], k["depth"], drafter, name) if g.method == "static"
                 else server_flags.chain_lines(label, k["gamma"], drafter, name, vllm_version))
    except ValueError as exc:  # the lookup drafter: no engine runs it
        return [str(exc)]
    return [*lines, server_flags.CONVENTIONS]


def grid(kind: str, x_text: str, y_text: str, fixed: str | None = None) -> Grid:
    """The sweep's method, knobs, checked values (at most MAX_CELLS cells) and held knobs: the `fixed` text
    over the method's declared defaults (None: the sweep's own fixed knobs)."""
    if kind not in SWEEPS:
        raise ValueError(f"unknown sweep '{kind}'")
    s = SWEEPS[kind]
    xs, ys = parse_values(x_text, s.x), parse_values(y_text, s.y) if s.y else [None]
    if len(xs) * len(ys) > MAX_CELLS:
        raise ValueError(f"{len(xs)}×{len(ys)} cells is too many for a shared CPU; keep it to {MAX_CELLS}")
    swept = (s.x,) + ((s.y,) if s.y else ())
    given = s.fixed if fixed is None else parse_fixed(s.method, fixed, swept)
    held = {k: v for k, v in core_knobs.resolve(s.method, given).items() if k not in swept and k not in NOT_FIXED}
    return Grid(s.method, s.x, s.y, xs, ys, held)


def parts(g: Grid) -> list[str]:
    """What sweep() runs, in order, for the progress line."""
    out = ["plain AR (before the grid)"]
    for i, y in enumerate(g.ys):
        last = i == len(g.ys) - 1
        after = "plain AR (after the grid)" if last else f"plain AR (after row {i + 1})"
        out += [g.label(x, y) for x in g.xs] + [after]
    return out


def warm_up(g: Grid, prompt: str, cfg: RunConfig, check: Callable[[], None] | None = None) -> None:
    """A few untimed tokens of AR and of the first cell: the first engine calls of a process, a model or a
    drafter pay one-off costs (allocations, thread pools, caches) that would otherwise fall on the AR pass
    before the grid and on the first cell, and make the first cell look slower than its neighbours."""
    short = replace(cfg, prompt=prompt, max_new_tokens=min(WARM_TOKENS, cfg.max_new_tokens))
    for method, knobs in (("ar", {}), (g.method, g.knobs(g.xs[0], g.ys[0]))):
        Run(replace(short, method=method, knobs=tuple(knobs.items()))).to_end(check).forget()


def sweep(g: Grid, prompts: list[str], cfg: RunConfig, check: Callable[[], None] | None = None
          ) -> Iterator[SweepResult]:
    """Yields the grid so far after the AR pass before it, after each cell and after each row's AR pass, in parts()
    order (unfinished cells None; a cell scored against the passes so far); the last result scores every cell
    against every pass. `check` runs before every engine step and may raise to stop (Cancel)."""
    def ar_pass() -> list[Baseline]:
        return [full_ar_pass(cfg.target, p, cfg.sampling, cfg.max_new_tokens, check).snapshot() for p in prompts]

    cells: list[list[Cell | None]] = [[None] * len(g.xs) for _ in g.ys]
    scores: list[list[CellScore | None]] = [[None] * len(g.xs) for _ in g.ys]
    warm_up(g, prompts[0], cfg, check)
    passes = [ar_pass()]
    yield SweepResult(g, [row[:] for row in scores])
    for i, y in enumerate(g.ys):
        for j, x in enumerate(g.xs):
            cells[i][j] = measure_cell(g.method, g.knobs(x, y), prompts, cfg, check)
            scores[i][j] = cells[i][j].score(passes)
            yield SweepResult(g, [row[:] for row in scores])
        passes.append(ar_pass())  # every finished cell is scored again against the passes so far
        scores = [[None if c is None else c.score(passes) for c in row] for row in cells]
        yield SweepResult(g, [row[:] for row in scores])
