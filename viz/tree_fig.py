"""The draft tree of one step as a Plotly figure: status colours, size by p(u), the target's verdict
on hover, and per-depth anchor m_d and gate μ·m_d written beside each level."""
from __future__ import annotations

import math

import plotly.graph_objects as go

from core.trace import ROOT, StepTrace
from viz.palette import FONT, STATUS_COLORS, STATUS_LABELS
from viz.tree_layout import ROOT_KEY, build_graph, node_key, tidy_layout

LABEL_LIMIT = 40  # above this many visible nodes, token text moves to hover only


def show_token(text: str) -> str:
    """Whitespace made visible, so '\\n' and ' ' tokens can be told apart in a plot."""
    return repr(text)[1:-1] if text.strip() else repr(text)


def marker_size(score: float) -> float:
    """Size by p(u) on a log scale: 1 -> 26 px, 1e-4 -> 6 px."""
    return 6 + 20 * max(0.0, 1 + math.log10(max(score, 1e-4)) / 4)


def _choice_at(trace: StepTrace) -> dict[int, tuple[str, float]]:
    return {c.at: (c.text, c.p) for c in trace.choices}


def _hover(trace: StepTrace, i: int, choices: dict) -> str:
    n = trace.nodes[i]
    p = "—" if n.p is None else f"{n.p:.3f}"
    lines = [f"<b>{show_token(n.text)}</b> (id {n.token_id}) · depth {n.depth}",
             f"q = {n.q:.3f} · p(u) = {n.score:.4f} · target p = {p}",
             STATUS_LABELS.get(n.status, n.status)]
    if n.parent in choices:
        text, prob = choices[n.parent]
        lines.append(f"target chose {show_token(text)} here (p = {prob:.3f})")
    return "<br>".join(lines)


def _level_tick(trace: StepTrace, depth: int) -> str:
    """Axis label of a depth: its anchor m_d and gate μ·m_d when the policy gated, and what it kept."""
    if depth < 0:
        return "root"
    lv = next((lv for lv in trace.levels if lv.depth == depth), None)
    if lv is None:
        return f"d={depth}"
    head = f"<b>d={depth}</b> kept {lv.kept}/{lv.candidates}"
    if lv.anchor is None:
        return head
    gate = "" if lv.gate is None else f" μ·m_d={lv.gate:.2g}"
    return f"{head}<br>m_d={lv.anchor:.2g}{gate}"


def tree_figure(trace: StepTrace | None, show_pruned: bool = True, title: str = "", height: int | None = None) -> go.Figure:
    """Draw one step's tree. A chain draws as a single path; an empty trace draws a hint."""
    fig = go.Figure()
    if height is None:  # two label lines per depth need about 55 px each
        depth = max((n.depth for n in trace.nodes), default=0) if trace is not None else 0
        height = max(440, 200 + 55 * (depth + 2))
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=10, r=10, t=40, b=10), title=dict(text=title, x=0.01),
                      showlegend=True, legend=dict(orientation="h", y=-0.02, yanchor="top"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, autorange="reversed")
    if trace is None or not trace.nodes:
        note = "Press Step to draft a tree" if trace is None else "This step drafted nothing (autoregressive step)"
        fig.add_annotation(text=note, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        return fig
    g = build_graph(trace, show_pruned)
    pos = tidy_layout(g)
    choices = _choice_at(trace)
    _draw_edges(fig, g, pos, trace)
    _draw_nodes(fig, g, pos, trace, choices)
    _draw_bonus(fig, pos, trace)
    levels = sorted({level for _, level in pos.values()})
    fig.update_yaxes(visible=True, showgrid=False, zeroline=False, tickvals=levels,
                     ticktext=[_level_tick(trace, level - 1) for level in levels], tickfont=dict(size=9))
    xs = [x for x, _ in pos.values()]
    fig.update_xaxes(range=[min(xs) - 0.8, max(xs) + 0.8])
    return fig


def _draw_edges(fig: go.Figure, g, pos: dict, trace: StepTrace) -> None:
    accepted = {node_key(i) for i in trace.accepted_path} | {ROOT_KEY}
    groups = {"path": ([], []), "other": ([], []), "pruned": ([], [])}
    for a, b in g.edges:
        kind = g.nodes[b]["view"].kind
        group = "pruned" if kind == "pruned" else "path" if (a in accepted and b in accepted) else "other"
        xs, ys = groups[group]
        xs += [pos[a][0], pos[b][0], None]
        ys += [pos[a][1], pos[b][1], None]
    style = {"path": dict(color=STATUS_COLORS["accepted"], width=3), "other": dict(color="#bbbbbb", width=1),
             "pruned": dict(color="#dddddd", width=1, dash="dot")}
    for group, (xs, ys) in groups.items():
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=style[group], hoverinfo="skip",
                                     showlegend=False))


def _draw_nodes(fig: go.Figure, g, pos: dict, trace: StepTrace, choices: dict) -> None:
    labels = g.number_of_nodes() <= LABEL_LIMIT
    buckets: dict[str, list[str]] = {}
    for key, data in g.nodes(data=True):
        v = data["view"]
        status = "root" if v.kind == "root" else "pruned" if v.kind == "pruned" else trace.nodes[v.index].status
        buckets.setdefault(status, []).append(key)
    for status in ("root", "accepted", "rejected", "unreached", "pruned"):
        keys = buckets.get(status, [])
        if not keys:
            continue
        xs, ys, sizes, hovers, texts = [], [], [], [], []
        for key in keys:
            v = g.nodes[key]["view"]
            xs.append(pos[key][0])
            ys.append(pos[key][1])
            if v.kind == "root":
                sizes.append(18)
                root_choice = choices.get(ROOT)
                hovers.append("<b>root</b>: the last committed token" + (
                    f"<br>target chose {show_token(root_choice[0])} (p = {root_choice[1]:.3f})" if root_choice else ""))
                texts.append("")
            elif v.kind == "pruned":
                c = trace.pruned[v.index]
                sizes.append(marker_size(c.score))
                hovers.append(f"<b>{show_token(c.text)}</b> · depth {c.depth}<br>q = {c.q:.3f} · "
                              f"p(u) = {c.score:.4f}<br>pruned by {c.reason}")
                texts.append("")
            else:
                n = trace.nodes[v.index]
                sizes.append(marker_size(n.score))
                hovers.append(_hover(trace, v.index, choices))
                texts.append(show_token(n.text)[:8] if labels else "")
        faint = status == "pruned"
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers+text" if labels else "markers", text=texts, textposition="top center",
            textfont=dict(size=10), hovertext=hovers, hoverinfo="text", name=STATUS_LABELS.get(status, status),
            showlegend=status != "root", opacity=0.6 if faint else 1.0,
            marker=dict(size=sizes, color=STATUS_COLORS[status], line=dict(width=1, color="white"),
                        symbol="circle-open" if faint else "circle"),
            meta=status,
        ))


def _draw_bonus(fig: go.Figure, pos: dict, trace: StepTrace) -> None:
    """The target's bonus token, hanging under the last accepted node (or the root)."""
    if not trace.choices:
        return
    bonus = trace.choices[-1]
    parent = pos.get(node_key(bonus.at))
    if parent is None:
        return
    x, y = parent[0], parent[1] + 0.6
    fig.add_trace(go.Scatter(x=[parent[0], x], y=[parent[1], y], mode="lines", showlegend=False,
                             line=dict(color=STATUS_COLORS["bonus"], width=2, dash="dot"), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers+text", text=[show_token(bonus.text)[:8]],
                             textposition="bottom center", name=STATUS_LABELS["bonus"], meta="bonus",
                             marker=dict(size=16, symbol="star", color=STATUS_COLORS["bonus"]),
                             hovertext=[f"<b>{show_token(bonus.text)}</b>: the target's own token "
                                        f"(p = {bonus.p:.3f}), committed after the accepted drafts"],
                             hoverinfo="text"))
