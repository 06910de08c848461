"""The draft tree of one step as a Plotly figure: status colours, size by p(u), the target's verdict
on hover, and per-depth anchor m_d and gate μ·m_d written beside each level."""
from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go

from core.trace import ROOT, StepTrace
from viz.escape import plot_text
from viz.palette import FONT, STATUS_COLORS, STATUS_LABELS, STATUS_SYMBOLS
from viz.title_legend import stack_top

LEGEND = {  # the tree's legend: a word each, so three fit a row on a phone (the caption and hovers say more)
    "accepted": "accepted", "rejected": "rejected", "unreached": "unjudged", "pruned": "pruned",
    "more": "folded", "drafted": "drafted", "focus": "this stage", "bonus": "bonus",
}
from viz.tree_layout import (ROOT_KEY, build_graph, collapse_wide, drawn_rows, fold_deep, leaves, node_key,
                              tidy_layout)

LABEL_SLOTS = 14  # up to this many leaf slots every node is labelled; beyond, only the accepted path
LEVEL_PX = 62  # vertical room per depth: a two-line level label and a token label between rows
MAX_HEIGHT_PX = 1400  # a tree figure is never taller, however deep the tree (deep ones are folded: tree_layout)


@dataclass(frozen=True)
class Reveal:
    """How much of a step a picture shows (the walk's stages, viz/walk.py): the tree grown down to `depth`
    (-1: the root alone), the target's verdicts only once it has verified, the bonus token only once it is
    chosen, rings around the drafted nodes a stage is about, and the draft's q against the target's p written
    beside the nodes in `compare` (where verification rejected). Drawn on the whole tree's layout, so nodes
    keep their places from stage to stage."""
    depth: int = 1 << 30
    verdicts: bool = True
    bonus: bool = True
    focus: tuple[int, ...] = ()
    compare: tuple[int, ...] = ()


WHOLE = Reveal()


def visible(text: str) -> str:
    """Whitespace made visible, so '\\n' and ' ' tokens can be told apart in a plot."""
    return repr(text)[1:-1] if text.strip() else repr(text)


def show_token(text: str) -> str:
    """A token for a plot label, escaped for Plotly (viz/escape.plot_text): it reads tags in hover and tick text."""
    return plot_text(visible(text))


def short(text: str, limit: int = 10) -> str:
    """A token label that says when it was cut (hover always has the whole token); cut before escaping,
    so an entity is never cut in half."""
    t = visible(text)
    return plot_text(t if len(t) <= limit else t[: limit - 1] + "…")


def natural_height(trace: StepTrace | None) -> int:
    """Enough height for every drawn depth's labels plus the bonus row, title and legend; bounded, since a
    very deep tree is drawn folded (viz/tree_layout.fold_deep)."""
    depth = max((n.depth for n in trace.nodes), default=0) if trace is not None else 0
    rows = drawn_rows(depth, path_end(trace)) if trace is not None else 1
    return min(MAX_HEIGHT_PX, max(460, 170 + LEVEL_PX * (rows + 2)))


def path_end(trace: StepTrace) -> int:
    """The depth where the accepted path ends (its bonus token hangs there; -1: the root): a deep tree is
    folded around it, never over it."""
    at = trace.choices[-1].at if trace.choices else ROOT
    return trace.nodes[at].depth if 0 <= at < len(trace.nodes) else -1


def marker_size(score: float) -> float:
    """Size by p(u) on a log scale: 1 -> 26 px, 1e-4 -> 6 px."""
    return 6 + 20 * max(0.0, 1 + math.log10(max(score, 1e-4)) / 4)


def _choice_at(trace: StepTrace) -> dict[int, tuple[str, float]]:
    return {c.at: (c.text, c.p) for c in trace.choices}


def _hover(trace: StepTrace, i: int, choices: dict, verdicts: bool = True) -> str:
    n = trace.nodes[i]
    p = "—" if n.p is None else f"{n.p:.3f}"
    head = f"<b>{show_token(n.text)}</b> (id {n.token_id}) · depth {n.depth}"
    if not verdicts:  # before verification the target has not seen it
        return f"{head}<br>q = {n.q:.3f} · p(u) = {n.score:.4f}<br>{STATUS_LABELS['drafted']}"
    lines = [head, f"q = {n.q:.3f} · p(u) = {n.score:.4f} · target p = {p}", STATUS_LABELS.get(n.status, n.status)]
    if n.parent in choices:
        text, prob = choices[n.parent]
        lines.append(f"target chose {show_token(text)} here (p = {prob:.3f})")
    return "<br>".join(lines)


def _row_tick(trace: StepTrace, row, reveal: Reveal = WHOLE) -> str:
    """Axis label of a drawn row: a depth's (`_level_tick`), or the folded depths' behind a gap."""
    if row.kind != "gap":
        return _level_tick(trace, row.depth, reveal)
    return "" if row.depth > reveal.depth else f"<b>d={row.depth}…{row.last}</b><br>folded"


def _level_tick(trace: StepTrace, depth: int, reveal: Reveal = WHOLE) -> str:
    """Axis label of a depth: its anchor m_d and gate μ·m_d when the policy gated, and what it kept (blank
    for a level a walk stage has not grown yet)."""
    if depth < 0:
        return "root"
    if depth > reveal.depth:
        return ""
    lv = next((lv for lv in trace.levels if lv.depth == depth), None)
    if lv is None:
        return f"d={depth}"
    head = f"<b>d={depth}</b> kept {lv.kept}/{lv.candidates}"
    if lv.anchor is None:
        return head
    gate = "" if lv.gate is None else f"<br>μ·m_d={lv.gate:.2g}"  # a line each: narrow, so a phone keeps its width
    return f"{head}<br>m_d={lv.anchor:.2g}{gate}"


def tree_figure(trace: StepTrace | None, show_pruned: bool = True, title: str = "", height: int | None = None,
                reveal: Reveal = WHOLE) -> go.Figure:
    """Draw one step's tree. A chain draws as a single path; an empty trace draws a hint. Pass the same
    `height` to trees shown side by side, so their levels line up; `reveal` draws only what a walk stage has
    done (on the whole tree's layout)."""
    fig = go.Figure()
    height = min(MAX_HEIGHT_PX, height or natural_height(trace))
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=8, r=8, b=8), showlegend=True, hoverlabel=dict(align="left"))
    fig.update_xaxes(visible=False, fixedrange=True)
    fig.update_yaxes(visible=False, autorange="reversed", fixedrange=True)
    if trace is None or not trace.nodes:
        note = "Press Step to draft a tree" if trace is None else "This step drafted nothing (autoregressive step)"
        fig.add_annotation(text=note, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        stack_top(fig, title, height)
        return fig
    keep = {node_key(i) for i in trace.accepted_path}
    if trace.choices:
        keep.add(node_key(trace.choices[-1].at))
    g = fold_deep(collapse_wide(build_graph(trace, show_pruned), keep), path_end(trace))
    pos = tidy_layout(g)
    labels_all = leaves(g) <= LABEL_SLOTS
    rows = {level: g.nodes[key]["view"] for key, (_, level) in pos.items()}  # what each drawn row stands for
    if reveal != WHOLE:
        g = g.subgraph([k for k, v in g.nodes(data="view") if v.kind == "root" or v.depth <= reveal.depth])
    choices = _choice_at(trace)
    _draw_edges(fig, g, pos, trace, reveal.verdicts)
    _draw_nodes(fig, g, pos, trace, choices, labels_all, reveal)
    _draw_focus(fig, pos, trace, reveal.focus)
    _draw_compare(fig, pos, trace, reveal.compare)
    if reveal.bonus:
        _draw_bonus(fig, pos, trace)
    levels = sorted({level for _, level in pos.values()})
    fig.update_yaxes(visible=True, showgrid=False, zeroline=False, tickvals=levels, automargin=True,
                     ticktext=[_row_tick(trace, rows[level], reveal) for level in levels], tickfont=dict(size=9),
                     range=[max(levels) + 1.15, -0.45], autorange=False)  # reversed, with room for the bonus
    xs = [x for x, _ in pos.values()]
    pad = max(0.9, 0.06 * (max(xs) - min(xs)))  # labels centred on the edge nodes stay inside
    fig.update_xaxes(range=[min(xs) - pad, max(xs) + pad])
    stack_top(fig, title, height)  # the title, then the legend under it: never one over the other
    return fig


def _draw_edges(fig: go.Figure, g, pos: dict, trace: StepTrace, verdicts: bool = True) -> None:
    accepted = {node_key(i) for i in trace.accepted_path if verdicts} | {ROOT_KEY}
    groups = {"path": ([], []), "other": ([], []), "pruned": ([], [])}
    for a, b in g.edges:
        kinds = {g.nodes[a]["view"].kind, g.nodes[b]["view"].kind}
        folded = kinds & {"pruned", "more", "gap"}
        group = "pruned" if folded else "path" if (a in accepted and b in accepted) else "other"
        xs, ys = groups[group]
        xs += [pos[a][0], pos[b][0], None]
        ys += [pos[a][1], pos[b][1], None]
    style = {"path": dict(color=STATUS_COLORS["accepted"], width=3), "other": dict(color="#bbbbbb", width=1),
             "pruned": dict(color="#dddddd", width=1, dash="dot")}
    for group, (xs, ys) in groups.items():
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=style[group], hoverinfo="skip",
                                     showlegend=False))


def _group_hover(trace: StepTrace, v, verdicts: bool = True) -> str:
    """A collapsed group's hover: how many it stands for and the best dozen of them."""
    names = []
    for key in v.hidden[:12]:
        item = trace.pruned[int(key[1:])] if key.startswith("x") else trace.nodes[int(key[1:])]
        kind = f"pruned by {item.reason}" if key.startswith("x") else item.status if verdicts else "drafted"
        names.append(f"{show_token(item.text)} · p(u) = {item.score:.4f} · {kind}")
    more = f"<br>… and {len(v.hidden) - 12} more" if len(v.hidden) > 12 else ""
    return (f"<b>+{v.count} more</b> nodes here: {len(v.hidden)} children and their subtrees, folded so the "
            f"level stays readable:<br>" + "<br>".join(names) + more)


def _gap_hover(trace: StepTrace, v) -> str:
    """A folded run of depths: how many nodes it stands for, and the first few drafted ones."""
    drafted = [trace.nodes[int(k[1:])] for k in v.hidden if k.startswith("n")][:6]
    names = [f"{show_token(n.text)} (d = {n.depth})" for n in drafted]
    listed = f":<br>{', '.join(names)} …" if names else ""
    return (f"<b>… {v.count} more</b> nodes at depths d = {v.depth}…{v.last}, folded so the tree stays a readable "
            f"height (the levels table lists every depth){listed}")


def _node_status(trace: StepTrace, v, verdicts: bool = True) -> str:
    if v.kind == "gap":
        return "more"
    if v.kind in ("root", "pruned", "more"):
        return v.kind
    return trace.nodes[v.index].status if verdicts else "drafted"


def _draw_focus(fig: go.Figure, pos: dict, trace: StepTrace, focus: tuple[int, ...]) -> None:
    """Rings around the drafted nodes a walk stage is about."""
    keys = [node_key(i) for i in focus if 0 <= i < len(trace.nodes) and node_key(i) in pos]
    if keys:
        fig.add_trace(go.Scatter(x=[pos[k][0] for k in keys], y=[pos[k][1] for k in keys], mode="markers",
                                 hoverinfo="skip", name=LEGEND["focus"], meta="focus",
                                 marker=dict(size=30, symbol="circle-open", color=STATUS_COLORS["focus"],
                                             line=dict(width=2.5))))


def _draw_compare(fig: go.Figure, pos: dict, trace: StepTrace, nodes: tuple[int, ...]) -> None:
    """'q = 0.62 vs p = 0.03' beside each node the target judged and rejected: why the walk stopped there."""
    for i in nodes:
        key = node_key(i)
        if not (0 <= i < len(trace.nodes)) or key not in pos or trace.nodes[i].p is None:
            continue
        n = trace.nodes[i]
        fig.add_annotation(x=pos[key][0], y=pos[key][1], ax=28, ay=-34, showarrow=True, arrowhead=2, arrowwidth=1.5,
                           arrowcolor=STATUS_COLORS["rejected"], font=dict(size=11, color=STATUS_COLORS["rejected"]),
                           bgcolor="rgba(255,255,255,0.85)", bordercolor=STATUS_COLORS["rejected"], borderpad=2,
                           text=f"{short(n.text, 8)}: draft q = {n.q:.2f} vs target p = {n.p:.2f}",
                           name="p vs q")


def _point(trace: StepTrace, v, choices: dict, labels_all: bool, reveal: Reveal) -> tuple[float, str, str]:
    """One node's marker size, hover and label; before verification (a walk stage) nothing the target said, and
    the nodes a stage is about always labelled."""
    verdicts = reveal.verdicts
    if v.kind == "root":
        root_choice = choices.get(ROOT) if verdicts else None
        return 18, "<b>root</b>: the last committed token" + (
            f"<br>target chose {show_token(root_choice[0])} (p = {root_choice[1]:.3f})" if root_choice else ""), ""
    if v.kind == "more":
        return 20, _group_hover(trace, v, verdicts), f"+{v.count}"
    if v.kind == "gap":
        return 20, _gap_hover(trace, v), f"… {v.count} more"
    if v.kind == "pruned":
        c = trace.pruned[v.index]
        return marker_size(c.score), (f"<b>{show_token(c.text)}</b> · depth {c.depth}<br>q = {c.q:.3f} · "
                                      f"p(u) = {c.score:.4f}<br>pruned by {c.reason}"), ""
    n = trace.nodes[v.index]
    label = labels_all or (verdicts and n.status == "accepted") or v.index in reveal.focus
    return marker_size(n.score), _hover(trace, v.index, choices, verdicts), short(n.text, 8) if label else ""


def _draw_nodes(fig: go.Figure, g, pos: dict, trace: StepTrace, choices: dict, labels_all: bool = True,
                reveal: Reveal = WHOLE) -> None:
    buckets: dict[str, list[str]] = {}
    for key, data in g.nodes(data=True):
        buckets.setdefault(_node_status(trace, data["view"], reveal.verdicts), []).append(key)
    for status in ("root", "accepted", "rejected", "unreached", "drafted", "pruned", "more"):
        keys = buckets.get(status, [])
        if not keys:
            continue
        points = [_point(trace, g.nodes[key]["view"], choices, labels_all, reveal) for key in keys]
        faint = status == "pruned"
        group = status == "more"
        fig.add_trace(go.Scatter(
            x=[pos[k][0] for k in keys], y=[pos[k][1] for k in keys], mode="markers+text",
            text=[t for _, _, t in points], textposition="middle center" if group else "top center",
            textfont=dict(size=9 if group else 10), hovertext=[h for _, h, _ in points], hoverinfo="text",
            name=LEGEND.get(status, status), showlegend=status != "root", opacity=0.6 if faint else 1.0,
            marker=dict(size=[z for z, _, _ in points], color=STATUS_COLORS[status], line=dict(width=1, color="white"),
                        symbol=STATUS_SYMBOLS[status]),
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
    fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers+text", text=[short(bonus.text, 14)],
                             textposition="bottom center", name=LEGEND["bonus"], meta="bonus",
                             marker=dict(size=16, symbol="star", color=STATUS_COLORS["bonus"]),
                             hovertext=[f"<b>{show_token(bonus.text)}</b>: the target's own token "
                                        f"(p = {bonus.p:.3f}), committed after the accepted drafts"],
                             hoverinfo="text"))
