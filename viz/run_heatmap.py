"""SpecBound's layer × token heatmap over the whole run: one column per drafted token of every step, so
the picture fills up as the run goes instead of showing a step's one or two tokens. The shown step is
shaded and its first crossings of τ_exit outlined; the x axis pans and zooms, and opens on the latest
columns when the run is long."""
from __future__ import annotations

import plotly.graph_objects as go

from core.trace import StepTrace
from viz.exits_fig import _empty, confidence_text, first_crossings, grids, heat_traces, knob, num_layers, tau_exit_of
from viz.palette import FONT
from viz.titles import wrap_title
from viz.tree_fig import short

VISIBLE_COLUMNS = 40  # columns shown at once before panning; more get too thin to read


def _columns(traces: list[StepTrace]) -> list[tuple[StepTrace, int]]:
    return [(t, col) for t in traces for col in range(len(t.exits))]


def _label(t: StepTrace, col: int) -> str:
    e = t.exits[col]
    text = t.nodes[e.node].text if 0 <= e.node < len(t.nodes) else (e.top_texts[-1] if e.top_texts else "?")
    return f"s{t.index + 1}·{short(text, 7)}"


def _head(t: StepTrace, col: int) -> str:
    return f"step {t.index + 1}, token {col + 1} ({_verdict(t, col)})"


def _verdict(t: StepTrace, col: int) -> str:
    e = t.exits[col]
    if e.exit_layer is None:
        return "reached d_max without exiting: drafting stopped here"
    return t.nodes[e.node].status if 0 <= e.node < len(t.nodes) else "not drafted"


def run_heatmap(traces: list[StepTrace], current: int | None, annealed: bool = True,
                height: int = 440) -> go.Figure:
    """traces: the run's steps so far; current: the index of the step to highlight."""
    fig = go.Figure()
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=50, r=20, t=72, b=60), hoverlabel=dict(align="left"))
    cols = _columns(traces)
    if not cols:
        return _empty(fig, "Press Step to draft with SpecBound's early exits")
    first = traces[0]
    L = max(num_layers(t) for t in traces)
    tau_exit = tau_exit_of(first)
    heat_traces(fig, list(range(len(cols))), L, grids([t.exits[col] for t, col in cols], L, annealed,
                                                       lambda c: _head(*cols[c])), tau_exit, annealed)
    exits = [(c, t.exits[col].exit_layer) for c, (t, col) in enumerate(cols) if t.exits[col].exit_layer]
    fig.add_trace(go.Scatter(x=[c for c, _ in exits], y=[y for _, y in exits], mode="markers", name="exit layer",
                             hoverinfo="skip", marker=dict(symbol="star", size=11, color="white",
                                                           line=dict(color="black", width=1))))
    _steps(fig, traces, cols, current, annealed, L)
    d_max, min_exit = knob(first, "d_max"), knob(first, "min_exit_layer")
    if d_max is not None:
        fig.add_hline(y=d_max + 0.5, line=dict(color="#d73027", dash="dash"),
                      annotation_text=f"d_max = {d_max}", annotation_position="top left")
    if min_exit and min_exit > 1:  # ℓ_min = 1 checks from the first layer, as the paper
        fig.add_hline(y=min_exit - 0.5, line=dict(color="#777", dash="dot"),
                      annotation_text=f"ℓ_min = {min_exit} (ours)", annotation_position="bottom left")
    fig.update_layout(title=dict(text=wrap_title(f"Layer × token confidence ({confidence_text(first, annealed)}) · "
                                                 f"every drafted token of the run"), x=0.01, y=0.98, yanchor="top"),
                      legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"), dragmode="pan")
    start = max(0, len(cols) - VISIBLE_COLUMNS)
    fig.update_xaxes(tickvals=list(range(len(cols))), ticktext=[_label(t, col) for t, col in cols], tickangle=-45,
                     range=[start - 0.5, len(cols) - 0.5], tickfont=dict(size=9))
    fig.update_yaxes(title="layer ℓ", range=[0.5, L + 0.5], dtick=1, fixedrange=True)
    return fig


def _steps(fig: go.Figure, traces: list[StepTrace], cols: list, current: int | None, annealed: bool, L: int) -> None:
    """Thin lines between steps; the current step shaded, with its first crossings of τ_exit outlined."""
    start = 0
    for t in traces:
        n = len(t.exits)
        if n and t.index == current:
            fig.add_shape(type="rect", x0=start - 0.5, x1=start + n - 0.5, y0=0.5, y1=L + 0.5, layer="above",
                          line=dict(color="#e6550d", width=3), fillcolor="rgba(0,0,0,0)", name="current step")
            fig.add_annotation(x=start + (n - 1) / 2, y=L + 0.5, yanchor="bottom", text=f"step {t.index + 1}",
                               showarrow=False, font=dict(color="#e6550d", size=11))
            _w_max(fig, t, start, n, L)
            for col, layer in enumerate(first_crossings(t, annealed)):
                if layer is not None:
                    fig.add_shape(type="rect", x0=start + col - 0.5, x1=start + col + 0.5, y0=layer - 0.5,
                                  y1=layer + 0.5, line=dict(color="black", width=2), name="first ≥ τ_exit")
        elif start:
            fig.add_vline(x=start - 0.5, line=dict(color="#999", width=1))
        start += n


def _w_max(fig: go.Figure, t: StepTrace, start: int, n: int, L: int) -> None:
    """The current step's w_max: how many of it the step drafted, and a dashed line where it bit."""
    w_max = knob(t, "w_max")
    if not w_max:
        return
    fig.add_annotation(x=start + (n - 1) / 2, y=L + 0.5, yanchor="bottom", yshift=14, showarrow=False,
                       text=f"{len(t.nodes)} of w_max = {w_max} drafted", font=dict(color="#d73027", size=10))
    if w_max <= n:
        fig.add_vline(x=start + w_max - 0.5, line=dict(color="#d73027", dash="dash"), name="w_max")
