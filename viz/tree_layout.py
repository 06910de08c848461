"""A tidy top-down layout for draft trees: depth goes down, leaves get evenly spaced slots and each
parent sits centred over its children, so wide TALON levels and deep chains both stay readable."""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from core.trace import ROOT, StepTrace

ROOT_KEY = "root"


@dataclass
class TreeNodeView:
    """One drawable node: a drafted node, a pruned candidate, or the root."""
    key: str  # "root", "n<i>" (drafted node i) or "x<j>" (pruned candidate j)
    kind: str  # root | node | pruned
    index: int  # index into nodes / pruned; -1 for the root
    depth: int  # -1 for the root
    score: float  # p(u); 1 for the root


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


def tidy_layout(g: nx.DiGraph, root: str = ROOT_KEY) -> dict[str, tuple[float, float]]:
    """Positions (x, depth level): leaves take consecutive x slots in score order (kept before pruned),
    parents are centred over their first and last child. Level 0 is the root."""
    pos: dict[str, tuple[float, float]] = {}
    next_slot = 0.0

    def order(children: list[str]) -> list[str]:
        views = [g.nodes[c]["view"] for c in children]
        ranked = sorted(zip(views, children), key=lambda vc: (vc[0].kind == "pruned", -vc[0].score))
        return [c for _, c in ranked]

    stack: list[tuple[str, int, bool]] = [(root, 0, False)]
    while stack:  # iterative post-order, so a 96-deep chain cannot hit the recursion limit
        key, level, expanded = stack.pop()
        children = order(list(g.successors(key)))
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
