"""A tidy top-down layout for draft trees: depth goes down, leaves get evenly spaced slots and each
parent sits centred over its children. Very wide levels are collapsed: each parent shows its best few
children and one "+k more" node standing for the rest (listed on hover), so a 60-node TALON level stays
readable in a half-width panel instead of drawing its nodes on top of each other. Very deep trees are folded
too: the first HEAD_LEVELS depths, the last TAIL_LEVELS and the rows where the accepted path ends are drawn, and
each run of depths between stands behind one "… n more" node, so a 1024-token chain draws at most 18 rows, not
1024 (a figure 64,000 px tall froze the browser tab)."""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from core.trace import ROOT, StepTrace

ROOT_KEY = "root"
MAX_SLOTS = 28  # leaf slots a half-width panel shows legibly (~20 px each)
HEAD_LEVELS = 10  # depths drawn from the top of a very deep tree
TAIL_LEVELS = 3  # depths drawn at its bottom, below the folded middle


@dataclass
class TreeNodeView:
    """One drawable node: a drafted node, a pruned candidate, the root, or a collapsed group."""
    key: str  # "root", "n<i>" (drafted node i), "x<j>" (pruned candidate j) or "more:<parent>"
    kind: str  # root | node | pruned | more | gap (folded middle depths, "… n more")
    index: int  # index into nodes / pruned; -1 for the root and groups
    depth: int  # -1 for the root; a gap's first folded depth
    score: float  # p(u); 1 for the root; the best hidden score for a group
    hidden: list[str] = field(default_factory=list)  # a group's folded children, best first
    count: int = 0  # a group's folded nodes, their subtrees included
    last: int = -1  # a gap's last folded depth


def node_key(i: int) -> str:
    return ROOT_KEY if i == ROOT else f"n{i}"


def build_graph(trace: StepTrace, show_pruned: bool = True) -> nx.DiGraph:
    """The draft tree as a networkx DiGraph rooted at the last committed token."""
    g = nx.DiGraph()
    g.add_node(ROOT_KEY, view=TreeNodeView(ROOT_KEY, "root", -1, -1, 1.0))
    for i, n in enumerate(trace.nodes):
        g.add_node(f"n{i}", view=TreeNodeView(f"n{i}", "node", i, n.depth, n.score))
    for i, n in enumerate(trace.nodes):
        g.add_edge(node_key(n.parent), f"n{i}")
    if show_pruned:
        for j, c in enumerate(trace.pruned):
            parent = node_key(c.parent)
            if parent in g:
                g.add_node(f"x{j}", view=TreeNodeView(f"x{j}", "pruned", j, c.depth, c.score))
                g.add_edge(parent, f"x{j}")
    return g


def ranked_children(g: nx.DiGraph, key: str) -> list[str]:
    """Kept nodes before pruned ones, each by score (best first)."""
    views = [g.nodes[c]["view"] for c in g.successors(key)]
    return [v.key for v in sorted(views, key=lambda v: (v.kind == "pruned", -v.score))]


def leaves(g: nx.DiGraph) -> int:
    return sum(1 for n in g if g.out_degree(n) == 0)


def collapse_wide(g: nx.DiGraph, keep: set[str], max_slots: int = MAX_SLOTS) -> nx.DiGraph:
    """Fold each parent's lower-ranked children (and their subtrees) into one group node until the tree
    has at most `max_slots` leaves. Nodes in `keep` (the accepted path, the bonus token's parent) and
    their ancestors are never folded."""
    if leaves(g) <= max_slots:
        return g
    protected = set(keep)
    for k in keep:
        if k in g:
            protected |= nx.ancestors(g, k)
    for cap in (8, 6, 4, 3, 2, 1):
        h = g.copy()
        for parent in [n for n in g if g.out_degree(n) > cap]:
            if parent not in h:
                continue  # already folded away under one of its ancestors
            children = ranked_children(g, parent)
            shown = [c for c in children if c in protected]
            shown += [c for c in children if c not in protected][:max(0, cap - len(shown))]
            hidden = [c for c in children if c not in shown]
            if len(hidden) < 2:
                continue  # a "+1 more" node saves nothing
            gone = set(hidden)
            for c in hidden:
                gone |= nx.descendants(h, c)
            h.remove_nodes_from(gone)
            best = g.nodes[hidden[0]]["view"]
            group = f"more:{parent}"
            h.add_node(group, view=TreeNodeView(group, "more", -1, best.depth, best.score, hidden, len(gone)))
            h.add_edge(parent, group)
        if leaves(h) <= max_slots:
            return h
    return h


def folded_runs(deepest: int, focus: int = -1, head: int = HEAD_LEVELS, tail: int = TAIL_LEVELS) -> list[range]:
    """The runs of depths a tree `deepest` deep draws as one gap row each: all but the first `head` depths, the
    last `tail`, and the rows around `focus` (where the accepted path ends: its parent, it, its children), in
    runs of two or more (a gap row in place of one depth saves nothing)."""
    shown = set(range(head)) | set(range(deepest - tail + 1, deepest + 1)) | {focus - 1, focus, focus + 1}
    runs, start = [], None
    for d in range(deepest + 2):
        if d <= deepest and d not in shown:
            start = d if start is None else start
        elif start is not None:
            runs += [range(start, d)] if d - start >= 2 else []
            start = None
    return runs


def drawn_rows(deepest: int, focus: int = -1) -> int:
    """How many depth rows a tree `deepest` deep is drawn with: one per depth, a folded run counting as one."""
    return deepest + 1 - sum(len(run) - 1 for run in folded_runs(deepest, focus))


def fold_deep(g: nx.DiGraph, focus: int = -1) -> nx.DiGraph:
    """Each folded run of depths (`folded_runs`) becomes one gap node under each node just above it that had
    children there; the first nodes below the run hang from it, so a long chain reads 'first nodes, … n more,
    last nodes'. Shallow trees come back unchanged."""
    views = dict(g.nodes(data="view"))
    for run in folded_runs(max(v.depth for v in views.values()), focus):
        g = _fold_run(g, run)
    return g


def _fold_run(g: nx.DiGraph, run: range) -> nx.DiGraph:
    """One run of depths folded: its nodes (and groups) removed, a gap node standing for them."""
    views = dict(g.nodes(data="view"))
    first, after = run.start, run.stop
    h = g.copy()
    h.remove_nodes_from([k for k, v in views.items() if v.kind != "root" and first <= v.depth < after])
    for top in [k for k, v in views.items() if v.depth == first - 1 and g.out_degree(k)]:
        below = nx.descendants(g, top)
        hidden = sorted((k for k in below if first <= views[k].depth < after), key=_order)
        key = f"gap:{top}"
        best = max((views[k].score for k in hidden), default=0.0)
        count = sum(views[k].count if views[k].kind == "more" else 1 for k in hidden)
        h.add_node(key, view=TreeNodeView(key, "gap", -1, first, best, hidden, count, after - 1))
        h.add_edge(top, key)
        h.add_edges_from((key, k) for k in below if views[k].depth == after)
    return h


def _order(key: str) -> tuple[int, int]:
    """Drafted nodes first, by index (depth order along a chain), then pruned candidates and groups."""
    return (0, int(key[1:])) if key[0] == "n" and key[1:].isdigit() else (1, 0)


def tidy_layout(g: nx.DiGraph, root: str = ROOT_KEY) -> dict[str, tuple[float, float]]:
    """Positions (x, depth level): leaves take consecutive x slots in rank order (kept before pruned,
    groups last), parents are centred over their first and last child. Level 0 is the root."""
    pos: dict[str, tuple[float, float]] = {}
    next_slot = 0.0

    def order(key: str) -> list[str]:
        views = [g.nodes[c]["view"] for c in g.successors(key)]
        rank = {"node": 0, "pruned": 1, "more": 2}
        return [v.key for v in sorted(views, key=lambda v: (rank.get(v.kind, 0), -v.score))]

    stack: list[tuple[str, int, bool]] = [(root, 0, False)]
    while stack:  # iterative post-order, so a 96-deep chain cannot hit the recursion limit
        key, level, expanded = stack.pop()
        children = order(key)
        if not children:
            pos[key] = (next_slot, level)
            next_slot += 1
        elif expanded:
            xs = [pos[c][0] for c in children]
            pos[key] = ((xs[0] + xs[-1]) / 2, level)
        else:
            stack.append((key, level, True))
            stack.extend((c, level + 1, False) for c in reversed(children))
    return pos
