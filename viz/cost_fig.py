"""This machine's cost curve beside the speed-up it implies: why the best tree is small on a CPU and large
on a GPU. Pure: numbers in, figure out (the numbers come from core.auto.cost_model.measure_costs and the run)."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.palette import FONT, METHOD_COLORS

CHOSEN = "#e6550d"


def cost_curve_figure(verify_n: list[int], verify_ms: list[float], chosen_n: int | None = None,
                      speedup: list[tuple[int, float]] | None = None, title: str = "", note: str = "",
                      height: int = 400, retimed: list[int] | None = None, flag: str = "") -> go.Figure:
    """Left: t_verify(n), the target's forward over n new tokens (ms), with the one-token forward as the
    reference, the points timed again as outliers ringed, and the chosen tree's n = N + 1 (N nodes + the
    root) marked. Right: the modelled speed-up over plain decoding at each budget N, the chosen N marked.
    Without a modelled speed-up (no run yet) the curve is drawn alone and `note` says why under the title;
    `flag` (a curve that does not rise with n) is said there too."""
    two = bool(speedup)
    fig = (make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                         subplot_titles=("t_verify(n): one target forward over n tokens",
                                         "modelled speed-up over AR by budget N")) if two else go.Figure())
    at = dict(row=1, col=1) if two else {}
    _verify_traces(fig, verify_n, verify_ms, chosen_n, retimed or [], at)
    if two:
        _speedup_traces(fig, speedup, chosen_n)
    fig.update_xaxes(title_text="n new tokens verified", rangemode="tozero", **at)
    fig.update_yaxes(title_text="ms", rangemode="tozero", **at)
    lines = [title] + ([f"⚠ {flag}"] if flag else []) + ([note] if note else [])
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height + 20 * len(lines),
                      margin=dict(l=50, r=20, t=50 + 22 * len(lines), b=90),
                      title=dict(text="<br>".join(f"<sub>{line}</sub>" if i else line for i, line in enumerate(lines)),
                                 x=0.01, y=1, yref="container", yanchor="top", pad=dict(t=12)),
                      legend=dict(orientation="h", x=0, y=-0.22, yanchor="top", font=dict(size=11)))
    return fig


def _verify_traces(fig: go.Figure, ns: list[int], ms: list[float], chosen_n: int | None, retimed: list[int],
                   at: dict) -> None:
    fig.add_trace(go.Scatter(x=ns, y=ms, mode="lines+markers", name="t_verify(n) measured",
                             line=dict(color=METHOD_COLORS["static"]),
                             hovertemplate="n = %{x}<br>%{y:.1f} ms<extra></extra>"), **at)
    again = [(n, t) for n, t in zip(ns, ms) if n in retimed]
    if again:
        fig.add_trace(go.Scatter(x=[n for n, _ in again], y=[t for _, t in again], mode="markers",
                                 name="timed again (was an outlier)",
                                 marker=dict(size=14, symbol="circle-open", color="#d95f02", line=dict(width=2)),
                                 hovertemplate="n = %{x}: timed again, fastest kept<extra></extra>"), **at)
    if ms:
        fig.add_hline(y=ms[0], line=dict(color="#999", dash="dot", width=1), annotation_text="1 token (an AR step)",
                      annotation_position="bottom right", **at)
    if chosen_n is not None and ns:
        n = chosen_n + 1
        fig.add_trace(go.Scatter(x=[n], y=[_interp(n, ns, ms)], mode="markers", name=f"chosen N = {chosen_n}",
                                 marker=dict(color=CHOSEN, size=13, symbol="star"),
                                 hovertemplate=f"N = {chosen_n} (+ root): %{{y:.1f}} ms<extra></extra>"), **at)


def _speedup_traces(fig: go.Figure, speedup: list[tuple[int, float]], chosen_n: int | None) -> None:
    xs, ys = zip(*sorted(speedup))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name="modelled speed-up",
                             line=dict(color=METHOD_COLORS["talon"]),
                             hovertemplate="N = %{x}<br>%{y:.2f}×<extra></extra>"), row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="#999", dash="dot", width=1), row=1, col=2)
    if chosen_n is not None and chosen_n in xs:
        fig.add_trace(go.Scatter(x=[chosen_n], y=[ys[xs.index(chosen_n)]], mode="markers", showlegend=False,
                                 marker=dict(color=CHOSEN, size=13, symbol="star"),
                                 hovertemplate="chosen N = %{x}: %{y:.2f}×<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title_text="node budget N", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(title_text="× AR", rangemode="tozero", row=1, col=2)


def _interp(x: float, xs: list[int], ys: list[float]) -> float:
    """Piecewise-linear, like CostModel.t_verify (kept here so the figure needs numbers only)."""
    if x <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]
