"""This machine's cost curve beside the speed-up it implies: why the best tree is small on a CPU and large
on a GPU. Pure: numbers in, figure out (the numbers come from core.cost_model.measure and the run)."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.palette import FONT, METHOD_COLORS

CHOSEN = "#e6550d"


def cost_curve_figure(verify_n: list[int], verify_ms: list[float], chosen_n: int | None = None,
                      speedup: list[tuple[int, float]] | None = None, title: str = "",
                      note: str = "", height: int = 400) -> go.Figure:
    """Left: t_verify(n), the target's forward over n new tokens (ms), with the one-token forward as the
    reference and the chosen tree's n = N + 1 (N nodes + the root) marked. Right: the modelled speed-up
    over plain decoding at each budget N, the chosen N marked. `speedup` may be empty (no run yet)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("t_verify(n): one target forward over n tokens",
                                        "modelled speed-up over AR by budget N"))
    fig.add_trace(go.Scatter(x=verify_n, y=verify_ms, mode="lines+markers", name="t_verify(n) measured",
                             line=dict(color=METHOD_COLORS["static"]),
                             hovertemplate="n = %{x}<br>%{y:.1f} ms<extra></extra>"), row=1, col=1)
    if verify_ms:
        fig.add_hline(y=verify_ms[0], line=dict(color="#999", dash="dot", width=1), row=1, col=1,
                      annotation_text="1 token (an AR step)", annotation_position="bottom right")
    if chosen_n is not None and verify_n:
        n = chosen_n + 1
        fig.add_trace(go.Scatter(x=[n], y=[_interp(n, verify_n, verify_ms)], mode="markers", name=f"chosen N = {chosen_n}",
                                 marker=dict(color=CHOSEN, size=13, symbol="star"),
                                 hovertemplate=f"N = {chosen_n} (+ root): %{{y:.1f}} ms<extra></extra>"), row=1, col=1)
    if speedup:
        xs, ys = zip(*sorted(speedup))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name="modelled speed-up",
                                 line=dict(color=METHOD_COLORS["talon"]),
                                 hovertemplate="N = %{x}<br>%{y:.2f}×<extra></extra>"), row=1, col=2)
        fig.add_hline(y=1.0, line=dict(color="#999", dash="dot", width=1), row=1, col=2)
        if chosen_n is not None and chosen_n in xs:
            fig.add_trace(go.Scatter(x=[chosen_n], y=[ys[xs.index(chosen_n)]], mode="markers", showlegend=False,
                                     marker=dict(color=CHOSEN, size=13, symbol="star"),
                                     hovertemplate="chosen N = %{x}: %{y:.2f}×<extra></extra>"), row=1, col=2)
    else:
        fig.add_annotation(text=note or "Step a TALON run to model its speed-up", showarrow=False, x=0.5, y=0.5,
                           xref="x2 domain", yref="y2 domain")
    fig.update_xaxes(title_text="n new tokens verified", row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="node budget N", row=1, col=2)
    fig.update_yaxes(title_text="× AR", rangemode="tozero", row=1, col=2)
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=50, r=20, t=140, b=44), title=dict(text=title, x=0.01, y=0.95, yanchor="top"),
                      legend=dict(orientation="h", x=0, y=1.16, yanchor="bottom", font=dict(size=11)))
    if speedup and note:
        fig.layout.title.text = f"{title}<br><sub>{note}</sub>"
    return fig


def _interp(x: float, xs: list[int], ys: list[float]) -> float:
    """Piecewise-linear, like CostModel.t_verify (kept here so the figure needs numbers only)."""
    if x <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]
