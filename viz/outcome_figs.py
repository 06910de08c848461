"""Outcome plots shared by every view: τ and δ per step, the (δ, τ) scatter against the Oracle line
τ = δ, acceptance by depth (Compare's bars and Tune's heatmaps: viz/tune_figs.py)."""
from __future__ import annotations

import plotly.graph_objects as go

from core.metrics import DepthAcceptance
from core.trace import StepTrace
from viz.palette import FONT, METHOD_COLORS, STATUS_COLORS
from viz.titles import wrap_title


def _base(height: int, title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=50, r=20, t=72, b=44), title=dict(text=wrap_title(title), x=0.01, y=0.98, yanchor="top"),
                      legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom", font=dict(size=11)))
    # the legend sits between the title and the plot, so it never covers an axis title
    return fig


def tau_delta_timeline(traces: list[StepTrace], current: int | None = None, height: int = 260) -> go.Figure:
    """τ (tokens committed) and δ (draft forwards) per step, and μ where an adaptive schedule moved it; the replayed
    step is highlighted."""
    fig = _base(height, "τ and δ per step")
    xs = [t.index + 1 for t in traces]
    fig.add_trace(go.Scatter(x=xs, y=[t.tau for t in traces], mode="lines+markers", name="τ tokens committed"))
    fig.add_trace(go.Scatter(x=xs, y=[t.delta for t in traces], mode="lines+markers", name="δ draft forwards",
                             line=dict(dash="dot")))
    adaptive = [t for t in traces if t.tree is not None and t.tree.mu_schedule == "adaptive"]
    if adaptive:  # the μ each step's gate used, on an axis of its own (it lives around 0.01–0.5)
        fig.add_trace(go.Scatter(x=[t.index + 1 for t in adaptive], y=[t.tree.knob("mu") for t in adaptive],
                                 mode="lines+markers", name="μ (adaptive)", yaxis="y2", meta="mu",
                                 line=dict(dash="dash", color="#999"), marker=dict(symbol="diamond", size=6)))
        fig.update_layout(yaxis2=dict(title="μ", overlaying="y", side="right", rangemode="tozero", showgrid=False))
    if current is not None and traces:
        fig.add_vline(x=current + 1, line=dict(color="#999", width=1))
    fig.update_xaxes(title="step", dtick=1 if len(traces) <= 20 else None)
    return fig


def oracle_scatter(series: dict[str, list[StepTrace]], height: int = 300) -> go.Figure:
    """One point per step at (δ, τ). Points on the Oracle line τ = δ got one token per draft forward."""
    fig = _base(height, "(δ, τ) per step vs the Oracle line τ = δ")
    top = 1
    for name, traces in series.items():
        if not traces:
            continue
        d = [t.delta for t in traces]
        tau = [t.tau for t in traces]
        top = max(top, *d, *tau)
        fig.add_trace(go.Scatter(x=d, y=tau, mode="markers", name=name, opacity=0.75,
                                 marker=dict(size=9, color=METHOD_COLORS.get(name.split()[0])),
                                 hovertext=[f"step {t.index + 1}: δ={t.delta}, τ={t.tau}" for t in traces],
                                 hoverinfo="text"))
    fig.add_trace(go.Scatter(x=[0, top + 1], y=[0, top + 1], mode="lines", name="Oracle τ = δ",
                             line=dict(color="#888", dash="dash"), meta="oracle"))
    fig.update_xaxes(title="δ (draft forwards)", range=[-0.3, top + 1])
    fig.update_yaxes(title="τ (tokens committed)", range=[0, top + 1])
    return fig


def depth_acceptance_bars(rows: list[DepthAcceptance], height: int = 260) -> go.Figure:
    """Per tree depth: the share of steps whose accepted path got through it, beside Σp(u), the drafter's
    own estimate — where the two part, the drafter is over- (or under-) confident at that depth."""
    fig = _base(height, "Acceptance by depth (this run)")
    if not rows:
        fig.add_annotation(text="Press Step to draft a tree", showarrow=False, xref="paper", yref="paper",
                           x=0.5, y=0.5, font=dict(color="#777"))
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return fig
    xs = [r.depth for r in rows]  # d = 0 is the first drafted token, as in the tree
    hover = [f"d = {r.depth}: {r.accepted} of the {r.steps} steps whose tree reached this depth got through"
             for r in rows]
    fig.add_trace(go.Bar(x=xs, y=[r.rate for r in rows], name="accepted (of the steps that reached d)",
                         marker_color=STATUS_COLORS["accepted"], hovertext=hover, hoverinfo="text+y"))
    fig.add_trace(go.Bar(x=xs, y=[r.predicted for r in rows], name="Σp(u) at this depth (drafter's estimate)",
                         marker_color="#bdbdbd"))
    fig.update_layout(barmode="group")
    fig.update_xaxes(title="draft depth d", dtick=1)
    fig.update_yaxes(title="per step", rangemode="tozero")
    return fig
