"""SpecBound views: the layer × token confidence heatmap (raw or annealed) with τ_exit, exit depths,
d_max and w_max drawn on it, and the exit-depth bars with why drafting stopped."""
from __future__ import annotations

import plotly.graph_objects as go

from core.knobs import TAU_EXIT
from core.trace import ExitTrace, StepTrace
from viz.palette import FONT, STATUS_COLORS, STATUS_LABELS
from viz.titles import wrap_title
from viz.tree_fig import short, show_token

STOP_WHY = {
    "d_max": "a token went d_max layers deep without any exit head reaching τ_exit (a hard token)",
    "w_max": "w_max tokens were drafted in a row, the bound on one block",
    "eos": "the draft produced end-of-text",
    "length": "the length limit was reached",
    "gamma": "the chain drafted its γ tokens",
    "budget": "the node budget N was spent",
    "frontier": "no candidate passed the gate, so the frontier was empty",
    "context": "the model's context window is full",
}


def depth_why(trace: StepTrace) -> str:
    """'depth' means different limits per method: a static tree's D, or (TALON, chains) the deepest level
    the tokens still allowed by max new tokens could use."""
    D = trace.tree.knob("depth") if trace.tree is not None else None
    if trace.method == "static" and D is not None and len(trace.levels) >= D + 1:
        return f"the static tree reached its depth D = {D}"
    return ("the tree reached the deepest level that the remaining length allows (max new tokens): "
            "a deeper draft could never be committed")


def knob(trace: StepTrace, name: str):
    """A SpecBound knob this step ran with (None for a trace without SpecBound's record)."""
    return None if trace.specbound is None else getattr(trace.specbound, name)


def tau_exit_of(trace: StepTrace) -> float:
    """τ_exit of the step; the declared default for a trace without SpecBound's record."""
    return TAU_EXIT.default if trace.specbound is None else trace.specbound.tau_exit


def confidence_text(trace: StepTrace, annealed: bool) -> str:
    """What the heatmap's confidence is: annealed or raw, and the tokens its softmax is over (with a reduced
    exit vocabulary the checks below L renormalise over the V_exit most frequent tokens)."""
    mode = "annealed max softmax(z/T_ℓ)" if annealed else "raw max softmax(z)"
    v = knob(trace, "exit_vocab")
    if v is None:
        return mode
    return f"{mode} over the whole vocabulary" if v == 0 else f"{mode} over the V_exit = {v} most frequent tokens"


def num_layers(trace: StepTrace) -> int:
    if trace.specbound is not None:
        return trace.specbound.num_layers
    return max((max(e.layers) for e in trace.exits if e.layers), default=1)


def why_stopped(trace: StepTrace) -> str:
    if trace.draft_stop is None:
        return "drafting did not record why it stopped"
    if trace.draft_stop == "depth":
        reason = depth_why(trace)
    elif trace.draft_stop == "frontier" and trace.method != "talon":
        reason = "the drafter proposed no further candidates"  # only TALON has a gate
    else:
        reason = STOP_WHY.get(trace.draft_stop, trace.draft_stop)
    d_max, w_max = knob(trace, "d_max"), knob(trace, "w_max")
    if trace.draft_stop == "d_max" and d_max is not None:
        reason += f" (d_max = {d_max})"
    if trace.draft_stop == "w_max" and w_max is not None:
        reason += f" (w_max = {w_max})"
    return f"Drafting stopped because {reason}."


def _empty(fig: go.Figure, note: str) -> go.Figure:
    fig.add_annotation(text=note, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _token_label(trace: StepTrace, col: int) -> str:
    e = trace.exits[col]
    text = trace.nodes[e.node].text if 0 <= e.node < len(trace.nodes) else (e.top_texts[-1] if e.top_texts else "?")
    return f"{col + 1}:{short(text, 6)}"


def _colorscale(tau_exit: float) -> list:
    """Blues below τ_exit, oranges at or above it: the colour edge is the exit boundary."""
    t = min(max(tau_exit, 0.01), 0.99)
    return [[0, "#f7fbff"], [t - 0.005, "#6baed6"], [t, "#fdae6b"], [1, "#a63603"]]


def cells(e, annealed: bool) -> tuple[list[tuple[int, float, str]], list[tuple[int, float, str]]]:
    """One exit record's (layer, shown confidence, hover) at its checks, and at the layers read only for the
    page (no check ran there: drawn faintly)."""
    pick = (lambda a, r: a) if annealed else (lambda a, r: r)
    checked = [(layer, pick(e.annealed_conf[i], e.raw_conf[i]),
                f"layer ℓ={layer} (checked)<br>top: {show_token(e.top_texts[i])}<br>raw {e.raw_conf[i]:.3f} · "
                f"annealed {e.annealed_conf[i]:.3f} (T_ℓ = {e.temperature[i]:.2f})") for i, layer in enumerate(e.layers)]
    unchecked = [(layer, pick(e.unchecked_annealed[i], e.unchecked_raw[i]),
                  f"layer ℓ={layer}: no check here (shown only, never used to draft)<br>top: "
                  f"{show_token(e.unchecked_top_texts[i])}<br>raw {e.unchecked_raw[i]:.3f} · annealed "
                  f"{e.unchecked_annealed[i]:.3f}") for i, layer in enumerate(e.unchecked_layers)]
    return checked, unchecked


def grids(columns: list, L: int, annealed: bool, label) -> tuple[list, list, list, list]:
    """(z, hover) of the checked cells and of the faint ones, layers × columns; `label(col)` heads a hover."""
    z, hover = [[None] * len(columns) for _ in range(L)], [[""] * len(columns) for _ in range(L)]
    zf, hoverf = [[None] * len(columns) for _ in range(L)], [[""] * len(columns) for _ in range(L)]
    for col, e in enumerate(columns):
        checked, unchecked = cells(e, annealed)
        for (grid, text), items in (((z, hover), checked), ((zf, hoverf), unchecked)):
            for layer, value, h in items:
                if 1 <= layer <= L:
                    grid[layer - 1][col], text[layer - 1][col] = value, f"{label(col)}<br>{h}"
    return z, hover, zf, hoverf


def heat_traces(fig: go.Figure, x: list, L: int, grid: tuple, tau_exit: float, annealed: bool) -> None:
    """The checked cells with the colour bar, and the faint cells where no check ran."""
    z, hover, zf, hoverf = grid
    scale = _colorscale(tau_exit)
    fig.add_trace(go.Heatmap(z=z, x=x, y=list(range(1, L + 1)), zmin=0, zmax=1, colorscale=scale,
                             hovertext=hover, hoverinfo="text", xgap=1, ygap=1, name="confidence",
                             colorbar=dict(title="annealed" if annealed else "raw", tickvals=[0, tau_exit, 1],
                                           ticktext=["0", f"τ_exit={tau_exit:g}", "1"])))
    if any(v is not None for row in zf for v in row):
        fig.add_trace(go.Heatmap(z=zf, x=x, y=list(range(1, L + 1)), zmin=0, zmax=1, colorscale=scale, opacity=0.3,
                                 hovertext=hoverf, hoverinfo="text", xgap=1, ygap=1, showscale=False,
                                 name="no check (shown only)"))


def confidence_heatmap(trace: StepTrace | None, annealed: bool = True, height: int = 420, upto: int | None = None,
                       focus: int | None = None) -> go.Figure:
    """Rows are layers ℓ (1 = shallowest), columns are the step's drafted tokens; checked cells in full colour,
    the layers read only for the page faint, cells never computed blank. Stars mark each token's exit layer.
    `upto`: only the first tokens drawn (a walk stage), on the whole step's axes; `focus` frames one token."""
    fig = go.Figure()
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=50, r=20, t=40, b=40))
    if trace is None or not trace.exits:
        return _empty(fig, "Press Step to draft with SpecBound's early exits")
    L, tau_exit, cols = num_layers(trace), tau_exit_of(trace), len(trace.exits)
    shown = trace.exits[:cols if upto is None else upto]
    labels = [_token_label(trace, c) for c in range(cols)]
    columns = shown + [blank_exit()] * (cols - len(shown))
    heat_traces(fig, labels, L, grids(columns, L, annealed, lambda c: f"token {c + 1}"), tau_exit, annealed)
    exits = [(labels[c], e.exit_layer) for c, e in enumerate(shown) if e.exit_layer is not None]
    fig.add_trace(go.Scatter(x=[x for x, _ in exits], y=[y for _, y in exits], mode="markers", name="exit layer",
                             marker=dict(symbol="star", size=14, color="white", line=dict(color="black", width=1))))
    _bounds(fig, trace, cols)
    for col, layer in enumerate(first_crossings(trace, annealed)[: len(shown)]):
        if layer is not None:  # outline the first cell at or above τ_exit: where this view would exit
            fig.add_shape(type="rect", x0=col - 0.5, x1=col + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                          line=dict(color="black", width=2), name="first ≥ τ_exit")
    if focus is not None and 0 <= focus < cols:
        fig.add_shape(type="rect", x0=focus - 0.5, x1=focus + 0.5, y0=0.5, y1=L + 0.5, name="this stage",
                      line=dict(color=STATUS_COLORS["focus"], width=3))
    fig.update_layout(title=dict(text=wrap_title(f"Layer × token confidence ({confidence_text(trace, annealed)}) · "
                                                 f"outlined: first layer ≥ τ_exit · faint: no check there"), x=0.01),
                      legend=dict(orientation="h", y=-0.12))
    fig.update_xaxes(categoryorder="array", categoryarray=labels)
    fig.update_yaxes(title="layer ℓ", range=[0.5, L + 0.5], dtick=1)
    return fig


def blank_exit() -> ExitTrace:
    """A column not drawn yet (a walk stage before that token)."""
    return ExitTrace(0, [], [], [], [], [], [], None)


def first_crossings(trace: StepTrace, annealed: bool) -> list[int | None]:
    """Per drafted token, the first evaluated layer whose shown confidence reaches τ_exit (None: none did).
    Annealed, this is the exit rule; raw, it shows where a token would have exited without ACT."""
    tau_exit = tau_exit_of(trace)
    out = []
    for e in trace.exits:
        confs = e.annealed_conf if annealed else e.raw_conf
        out.append(next((layer for layer, c in zip(e.layers, confs) if c >= tau_exit), None))
    return out


def _bounds(fig: go.Figure, trace: StepTrace, cols: int) -> None:
    d_max, w_max, min_exit = knob(trace, "d_max"), knob(trace, "w_max"), knob(trace, "min_exit_layer")
    if d_max is not None:
        fig.add_hline(y=d_max + 0.5, line=dict(color="#d73027", dash="dash"),
                      annotation_text=f"d_max = {d_max}", annotation_position="top left")
    if min_exit and min_exit > 1:  # ℓ_min = 1 checks from the first layer, as the paper
        fig.add_hline(y=min_exit - 0.5, line=dict(color="#777", dash="dot"),
                      annotation_text=f"ℓ_min = {min_exit} (ours)", annotation_position="bottom left")
    if w_max is not None and w_max <= cols:
        fig.add_vline(x=w_max - 0.5, line=dict(color="#d73027", dash="dash"),
                      annotation_text=f"w_max = {w_max}", annotation_position="top right")


BONUS_COLUMN = "then: bonus"


def exact_depths(trace: StepTrace) -> list[int]:
    """Per exit record, how many of its layers were computed exactly while drafting: as the step recorded them,
    or for an older export (whose drafting approximated earlier tokens' K/V) the prefix minimum of its
    drafting depths."""
    if trace.specbound is not None and len(trace.specbound.exact_depths) == len(trace.exits):
        return list(trace.specbound.exact_depths)
    out, low = [], 1 << 30
    for e in trace.exits:
        low = min(low, max(e.layers, default=0))
        out.append(low)
    return out


def carried_segments(fig: go.Figure, trace: StepTrace, labels: list[str], depths: list[int]) -> None:
    """Layers drafting computed for a token above its own exit, while a later token that went deeper carried it
    along (so that token saw exact K/V): drawn between its exit bar and its verification segment."""
    base = exact_depths(trace)
    rows = [(x, d, b) for x, d, b in zip(labels, depths, base) if b > d]
    if not rows:
        return
    fig.add_trace(go.Bar(x=[x for x, _, _ in rows], y=[b - d for _, d, b in rows], base=[d for _, d, _ in rows],
                         name="carried along while a later token drafted deeper",
                         marker=dict(color="rgba(120,120,120,0.25)", line=dict(color="#777", width=1)),
                         hovertext=[f"layers {d + 1}–{b}: computed while drafting, with a later token that went "
                                    f"deeper" for _, d, b in rows], hoverinfo="text", meta="carried",
                         showlegend=True))


def verify_segments(fig: go.Figure, trace: StepTrace, labels: list[str], L: int) -> None:
    """The layers the one verification pass computed for each token: from its exact depth up to L, hatched
    above its drafting bar."""
    base = exact_depths(trace)
    hovers = [f"layers {b + 1}–{L}: computed in the verification pass" for b in base]
    x = list(labels)
    last = trace.exits[-1] if trace.exits else None
    if last is not None and 0 <= last.node < len(trace.nodes):  # the last drafted token was never fed: the pass
        x.append(BONUS_COLUMN)  # runs its L layers too, for the target's next token
        base.append(0)
        hovers.append(f"layers 1–{L} of the last drafted token, never fed while drafting: the target's own next "
                      f"token (the bonus) comes from them")
    fig.add_trace(go.Bar(x=x, y=[L - b for b in base], base=base, name="computed in the one verification pass",
                         marker=dict(color="rgba(0,114,178,0.22)", pattern=dict(shape="/", fgcolor="#0072b2"),
                                     line=dict(color="#0072b2", width=1)),
                         hovertext=hovers, hoverinfo="text", meta="verify", showlegend=True))
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(categoryorder="array", categoryarray=x)


def compare_note(fig: go.Figure, trace: StepTrace, labels: list[str], depths: list[int], node: int) -> None:
    """'draft q = 0.62 vs target p = 0.03' over the rejected token's bar."""
    col = next((c for c, e in enumerate(trace.exits) if e.node == node), None)
    if col is None or not 0 <= node < len(trace.nodes) or trace.nodes[node].p is None:
        return
    n = trace.nodes[node]
    fig.add_annotation(x=labels[col], y=depths[col], ay=-40, showarrow=True, arrowhead=2, name="p vs q",
                       arrowcolor=STATUS_COLORS["rejected"], font=dict(size=11, color=STATUS_COLORS["rejected"]),
                       bgcolor="rgba(255,255,255,0.85)", bordercolor=STATUS_COLORS["rejected"],
                       text=f"rejected: draft q = {n.q:.2f} vs target p = {n.p:.2f}")


def exit_bars(trace: StepTrace | None, height: int = 300, verify: bool = False,
              compare: int | None = None) -> go.Figure:
    """Exit depth of each drafted token, coloured by the target's verdict; a token that hit d_max is black-edged.
    `verify`: also the layers the verification pass computed above them; `compare`: a rejected node's q vs p."""
    fig = go.Figure()
    fig.update_layout(template="plotly_white", font=dict(family=FONT, size=12), height=height,
                      margin=dict(l=50, r=20, t=40, b=40))
    if trace is None or not trace.exits:
        return _empty(fig, "Exit depths appear after a SpecBound step")
    L = num_layers(trace)
    d_max = knob(trace, "d_max")
    labels, depths, colors, edges, hovers = [], [], [], [], []
    for col, e in enumerate(trace.exits):
        labels.append(_token_label(trace, col))
        hit = e.exit_layer is None
        depths.append(max(e.layers) if hit and e.layers else e.exit_layer)
        status = trace.nodes[e.node].status if 0 <= e.node < len(trace.nodes) else "unreached"
        colors.append(STATUS_COLORS.get(status, "#9e9e9e"))
        edges.append("#000" if hit else "rgba(0,0,0,0)")
        hovers.append(f"exit at layer {e.exit_layer} of {L}" if not hit else f"no exit within d_max = {d_max}")
    fig.add_trace(go.Bar(x=labels, y=depths, marker=dict(color=colors, line=dict(color=edges, width=2)),
                         hovertext=hovers, hoverinfo="text", name="exit depth", showlegend=False))
    bar_legend(fig, [c for c, e in zip(colors, edges) if e != "#000"], "#000" in edges)
    if compare is not None:
        compare_note(fig, trace, labels, depths, compare)
    if d_max is not None:
        fig.add_hline(y=d_max, line=dict(color="#d73027", dash="dash"), annotation_text=f"d_max = {d_max}")
    w_max = knob(trace, "w_max")
    if w_max and w_max <= len(labels):
        fig.add_vline(x=w_max - 0.5, line=dict(color="#d73027", dash="dash"), annotation_text=f"w_max = {w_max}",
                      annotation_position="top left")
    saved = 1 - sum(depths) / max(1, L * len(depths))
    bound = f" · w_max = {w_max}" if w_max else ""
    fig.update_layout(title=dict(text=wrap_title(f"Exit depth per drafted token · layers skipped while drafting: "
                                                 f"{saved:.0%} of full forwards{bound}"), x=0.01, font=dict(size=12)),
                      legend=dict(orientation="h", y=-0.2, font=dict(size=11)))
    fig.update_xaxes(categoryorder="array", categoryarray=labels)
    fig.update_yaxes(title="layers run", range=[0, L + 0.5])
    if verify:
        carried_segments(fig, trace, labels, depths)
        verify_segments(fig, trace, labels, L)
    return fig


def bar_legend(fig: go.Figure, colors: list[str], hit: bool) -> None:
    """A legend entry per colour the drafted tokens' bars use, and one for the token that hit d_max (the bars
    are one trace, so the legend is drawn beside them)."""
    entries = [(STATUS_COLORS[s], STATUS_LABELS[s], "rgba(0,0,0,0)") for s in ("accepted", "rejected", "unreached")
               if STATUS_COLORS[s] in colors]
    if hit:
        entries.append((STATUS_COLORS["unreached"], "reached d_max without exiting: not drafted", "#000"))
    for color, name, edge in entries:
        fig.add_trace(go.Bar(x=[None], y=[None], name=name, marker=dict(color=color, line=dict(color=edge, width=2)),
                             hoverinfo="skip", showlegend=True))
