"""A tidy top-down layout for draft trees: depth goes down, leaves get evenly spaced slots and each
parent sits centred over its children. Very wide levels are collapsed: each parent shows its best few
children and one "+k more" node standing for the rest (listed on hover), so a 60-node TALON level stays
readable in a half-width panel instead of drawing its nodes on top of each other."""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from core.trace import ROOT, StepTrace

ROOT_KEY = "root"
MAX_SLOTS = 28  # leaf slots a half-width panel shows legibly (~20 px each)


@dataclass
class TreeNodeView:
    """One drawable node: a drafted node, a pruned candidate, the root, or a collapsed group."""
    key: str  # "root", "n<i>" (drafted node i), "x<j>" (pruned candidate j) or "more:<parent>"
    kind: str  # root | node | pruned | more
    index: int  # index into nodes / pruned; -1 for the root and groups
    depth: int  # -1 for the root
    score: float  # p(u); 1 for the root; the best hidden score for a group
    hidden: list[str] = field(default_factory=list)  # a group's folded children, best first
    count: int = 0  # a group's folded nodes, their subtrees included


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
