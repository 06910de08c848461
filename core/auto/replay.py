"""What `auto` keeps of each recent tree step, and how it weighs them (core/auto/budget.py decides).

A tree step becomes a Replay (its nodes' depths in keep order, where the accepted path sits in that order,
its budget and its measured times) and one row of a Table: τ and the cost curves' ms of the tree cut to
every budget of auto's grid, as arrays, so that a decision is a few numpy reductions. Recent trees weigh
more: a tree's weight halves every `half_life` steps of age (core/auto/config.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.auto.shape_calibration import T_GRID
from core.trace import StepTrace

@dataclass
class Replay:
    """One recent tree, reduced to what the predictor needs."""
    depths: list[int]  # per node, in keep order (ancestors first)
    accepted_ranks: list[int]  # positions in that order of the accepted path's nodes
    budget: int  # the N it was grown with: it answers for every budget up to this one
    step_ms: float  # the step's measured wall time
    forward_ms: float  # of which the drafter and target forwards
    static_levels: int | None  # static tree: δ = D + 1 whatever N


@dataclass
class Table:
    """The recent replays at every budget of auto's grid, as arrays, one row per replay (appended as steps
    are observed: the predictor runs every step and must cost next to nothing beside a forward)."""
    tau: np.ndarray  # (R, G) τ of each tree truncated to each budget
    curve: np.ndarray  # (R, G) the cost curves' ms of the same
    full: np.ndarray  # (R,) the curves' ms of each whole tree
    step: np.ndarray  # (R,) each step's measured wall ms
    forward: np.ndarray  # (R,) of which its forwards
    budget: np.ndarray  # (R,) the budget each tree was grown with

    @classmethod
    def empty(cls, g: int) -> "Table":
        return cls(np.zeros((0, g)), np.zeros((0, g)), *(np.zeros(0) for _ in range(4)))

    def append(self, tau: list[float], curve: list[float], full: float, step: float, forward: float,
               budget: int, history: int) -> "Table":
        """A new table with this row added and only the last `history` rows kept."""
        def add(a: np.ndarray, row) -> np.ndarray:
            return np.concatenate([a, np.asarray([row], dtype=float)])[-history:]
        return Table(add(self.tau, tau), add(self.curve, curve), add(self.full, full), add(self.step, step),
                     add(self.forward, forward), add(self.budget, budget))


def age_weights(count: int, half_life: int) -> np.ndarray:
    """(count,) weights of the recent trees, oldest first: halving every `half_life` steps of age."""
    return 0.5 ** (np.arange(count)[::-1] / half_life)


def tau_of(r: Replay, n: int) -> float:
    """What replay r truncated to its first n nodes committed: the bonus token + the kept accepted nodes."""
    return 1.0 + sum(rank < n for rank in r.accepted_ranks)


def budget_of(trace: StepTrace) -> int:
    """The budget a tree step had: auto's choice, else its N knob (else its size)."""
    return trace.budget()[0] or len(trace.nodes)


def calibration_of(trace: StepTrace) -> tuple[list[float], int]:
    """A step's T_shape evidence (none in exports from before auto fitted T_shape)."""
    tree = trace.tree
    if tree is None or len(tree.t_nll) != len(T_GRID):
        return [0.0] * len(T_GRID), 0
    return list(tree.t_nll), tree.t_nll_rows


def replay_of(trace: StepTrace) -> Replay:
    static = trace.tree is not None and trace.tree.policy == "static"
    order = list(range(len(trace.nodes)))
    if static:  # the static tree of a smaller budget keeps the best N by p(u), ancestors first
        order.sort(key=lambda i: (-trace.nodes[i].score, trace.nodes[i].depth))
    rank = {node: r for r, node in enumerate(order)}
    forward = trace.draft_ms + trace.verify_ms
    total = trace.step_ms or (trace.build_ms + forward)  # exports from before step_ms: no overhead known
    return Replay([trace.nodes[i].depth for i in order], sorted(rank[i] for i in trace.accepted_path),
                  budget_of(trace), total, forward, trace.delta if static else None)
