"""Compare's bars and Tune's heatmaps, drawn so they do not overstate: every speed-up with its range, the
speed-up colours diverging from a neutral 1.0× (slower is one hue, faster the other, equal is pale; 0.91× is
a faint "slower", never a bright cell), and cells timed over too few tokens to rank marked as such.
Speed-ups are coloured on a log scale, so 0.5× is as far below the middle as 2× is above it.
Pure: numbers in, figures and HTML out."""
from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.metrics import Speedup
from viz.escape import esc, num
from viz.palette import FONT, METHOD_COLORS

SLOWER, EVEN, FASTER = "#b2182b", "#f7f7f7", "#2166ac"  # ColorBrewer RdBu ends: safe under colour blindness
DIVERGING = [[0.0, SLOWER], [0.25, "#ef8a62"], [0.5, EVEN], [0.75, "#67a9cf"], [1.0, FASTER]]
MIN_SPAN = 1.5  # the colour scale reaches at least 1/1.5× and 1.5×: a few per cent never looks decisive
FEW = "⚠ too few tokens to rank"
MAX_TIES = 5  # cells named as possibly as fast as the fastest; the rest counted


@dataclass
class CellScore:
    """One grid cell as measured: MAT with its range, the speed-up with its range, the tokens it timed."""
    mat: float
    mat_range: tuple[float, float] | None
    speedup: Speedup | None
    tokens: int
    few: bool  # fewer tokens than the page needs to rank cells


def _range(lo: float | None, hi: float | None, suffix: str = "") -> str:
    return "" if lo is None or hi is None else f"{lo:.2f}–{hi:.2f}{suffix}"


def _cell_text(value: str, spread: str, few: bool) -> str:
    return value + (f"<br><span style='font-size:11px'>{spread}</span>" if spread else "") + \
        ("<br>⚠ few tokens" if few else "")


def diverging_range(values: list[float]) -> tuple[float, float]:
    """(zmin, zmax) of log2(speed-up), symmetric about 0, so the scale's midpoint, the neutral colour, is
    exactly 1.0×."""
    span = max([math.log2(MIN_SPAN), *(abs(math.log2(v)) for v in values if v > 0)])
    return -span, span


def _heatmap(xs: list, ys: list, z: list[list[float | None]], text: list[list[str]], title: str, xlabel: str,
             ylabel: str, height: int) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=z, x=[str(x) for x in xs], y=["" if y is None else str(y) for y in ys], text=text,
                               texttemplate="%{text}", textfont=dict(size=13), hovertemplate="%{text}<extra></extra>",
                               xgap=2, ygap=2))
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=50, r=20, t=96, b=44),
                      title=dict(text=title, x=0.01, y=1, yref="container", yanchor="top", pad=dict(t=16)))
    fig.update_xaxes(title=xlabel, type="category")
    fig.update_yaxes(title=ylabel, type="category")
    return fig


def mat_heatmap(xs: list, ys: list, cells: list[list[CellScore | None]], title: str, xlabel: str, ylabel: str,
                height: int = 380) -> go.Figure:
    """MAT per cell (a sequential scale: more is more), with its 10th-90th percentile over resampled steps."""
    z = [[None if c is None else c.mat for c in row] for row in cells]
    text = [["" if c is None else _cell_text(f"{c.mat:.2f}", _range(*(c.mat_range or (None, None))), c.few)
             for c in row] for row in cells]
    fig = _heatmap(xs, ys, z, text, title, xlabel, ylabel, height)
    fig.update_traces(colorscale="Viridis", colorbar=dict(title="MAT"))
    return fig


def speedup_heatmap(xs: list, ys: list, cells: list[list[CellScore | None]], title: str, xlabel: str, ylabel: str,
                    height: int = 380) -> go.Figure:
    """Measured speed-up over AR per cell with its range; red slower, blue faster, pale at 1.0×."""
    sp = [[None if c is None or c.speedup is None else c.speedup for c in row] for row in cells]
    z = [[None if s is None or s.value <= 0 else math.log2(s.value) for s in row] for row in sp]
    text = [["" if c is None or s is None else _cell_text(f"{s.value:.2f}×", _range(s.lo, s.hi, "×"), c.few)
             for c, s in zip(row_c, row_s)] for row_c, row_s in zip(cells, sp)]
    lo, hi = diverging_range([s.value for row in sp for s in row if s is not None])
    fig = _heatmap(xs, ys, z, text, title, xlabel, ylabel, height)
    ticks = [lo, lo / 2, 0.0, hi / 2, hi]
    fig.update_traces(colorscale=DIVERGING, zmin=lo, zmax=hi,
                      colorbar=dict(title="× AR", tickvals=ticks, ticktext=[f"{2 ** t:.2f}×" for t in ticks]))
    return fig


def compare_bars(rows: list[dict], height: int = 320) -> go.Figure:
    """rows: {method, mat, speedup, lo, hi} per method that ran; MAT and the measured speed-up side by side,
    each speed-up with an error bar over its range (none where too few steps gave none)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("MAT (mean τ)", "speed-up over AR (measured, with range)"))
    names = [r["method"] for r in rows]
    colors = [METHOD_COLORS.get(n, "#888") for n in names]
    fig.add_trace(go.Bar(x=names, y=[r["mat"] for r in rows], marker_color=colors, showlegend=False), 1, 1)
    values = [r.get("speedup") or 0.0 for r in rows]
    up = [0.0 if r.get("hi") is None else r["hi"] - v for r, v in zip(rows, values)]
    down = [0.0 if r.get("lo") is None else v - r["lo"] for r, v in zip(rows, values)]
    fig.add_trace(go.Bar(x=names, y=values, marker_color=colors, showlegend=False, name="speed-up",
                         error_y=dict(type="data", symmetric=False, array=up, arrayminus=down, color="#333",
                                      thickness=1.5, width=6),
                         hovertemplate="%{x}: %{y:.2f}×<extra></extra>"), 1, 2)
    fig.add_hline(y=1, line=dict(color="#888", dash="dash"), row=1, col=2)
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=40, r=20, t=40, b=40))
    return fig


@dataclass
class Ranked:
    """A cell's name on the page ('μ = 0.1, N = 12') and its measured speed-up."""
    label: str
    speedup: Speedup


def ranking_html(cells: list[Ranked], few: int, min_tokens: int, held: str, spread_note: str) -> str:
    """Under the heatmaps: what was held fixed, the fastest cell and those whose ranges reach it (they may be as
    fast), and the too-few-tokens warning. Every value escaped."""
    lines = [f"<b>Held fixed:</b> {esc(held or 'nothing: one knob swept, the method has no other')}"]
    if cells:
        best = max(cells, key=lambda c: c.speedup.value)
        ties = [c for c in cells if c is not best and best.speedup.lo is not None and c.speedup.hi is not None
                and c.speedup.hi >= best.speedup.lo]
        line = (f"<b>Fastest:</b> {esc(best.label)}: {num(best.speedup.value, '.2f', '×')} "
                f"({esc(_range(best.speedup.lo, best.speedup.hi, '×') or 'no range')})")
        if ties:
            ties.sort(key=lambda c: -c.speedup.value)
            names = "; ".join(f"{esc(c.label)} ({num(c.speedup.value, '.2f', '×')})" for c in ties[:MAX_TIES])
            more = f" and {len(ties) - MAX_TIES} more" if len(ties) > MAX_TIES else ""
            line += f". Within its range, so possibly as fast: {names}{more}"
        lines.append(line)
    if few:
        lines.append(f'<span class="ss-warn" role="alert">{FEW}: {few} cell(s) timed fewer than {min_tokens} tokens; '
                     f'their ranges are wide or missing. Use more prompts or more new tokens before trusting the '
                     f'order.</span>')
    lines.append(esc(spread_note))
    return '<div class="ss-tune-summary" id="tune-summary-text">' + "<br>".join(lines) + "</div>"
