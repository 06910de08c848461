"""Hand-written traces for the viz and handler tests: SPEC's TALON worked example and a SpecBound block."""
from __future__ import annotations

from core.trace import (ROOT, DraftNode, ExitTrace, LevelTrace, PrunedCandidate, SpecBoundStep, StepTrace,
                        TargetChoice, TreeStep)


def talon_example(index: int = 0) -> StepTrace:
    """N = 4, K = 2, k = 1, μ = 0.2: tree {a, b, a→d, b→f}; e cut by the gate, g by the budget.
    The target accepts a, then picks its own 'x' at a (so d is rejected, b rejected, f unreached)."""
    nodes = [
        DraftNode(1, "a", ROOT, 0, 0.6, 0.6, 0.7, "accepted"),
        DraftNode(2, "b", ROOT, 0, 0.3, 0.3, 0.2, "rejected"),
        DraftNode(4, "d", 0, 1, 0.9, 0.54, 0.1, "rejected"),
        DraftNode(6, "f", 1, 1, 0.6, 0.18, None, "unreached"),
    ]
    levels = [LevelTrace(0, 1, 3, 2, cut_by_topk=1, budget_left=2),
              LevelTrace(1, 2, 4, 2, anchor=0.54, gate=0.108, cut_by_gate=1, cut_by_budget=1, budget_left=0)]
    pruned = [PrunedCandidate(5, "e", 0, 1, 0.1, 0.06, "gate"), PrunedCandidate(7, "g", 1, 1, 0.4, 0.12, "budget")]
    choices = [TargetChoice(ROOT, 1, "a", 0.7), TargetChoice(0, 9, "x", 0.8)]
    return StepTrace(index, "talon", 10, nodes, [0], choices, [1, 9], ["a", "x"], tau=2, delta=2,
                     target_forwards=1, draft_ms=2.0, verify_ms=4.0, levels=levels, pruned=pruned,
                     draft_stop="budget", tree=TreeStep("talon", {"N": 4, "K": 2, "mu": 0.2, "k_init": 1}))


def chain_of(n: int) -> StepTrace:
    nodes = [DraftNode(i, f"t{i}", i - 1 if i else ROOT, i, 0.9, 0.9 ** (i + 1), 0.9, "accepted") for i in range(n)]
    return StepTrace(0, "chain", 5, nodes, list(range(n)), [TargetChoice(n - 1, 0, "z", 0.5)], [0] * (n + 1),
                     ["t"] * (n + 1), tau=n + 1, delta=n, tree=TreeStep("chain", {"gamma": n}))


def wide_tree(n: int = 96, width: int = 12) -> StepTrace:
    """Root Top-`width`, then every further node under the root's children round-robin."""
    nodes = [DraftNode(i, f"w{i}", ROOT, 0, 0.05, 0.05, 0.05, "rejected") for i in range(width)]
    for i in range(width, n):
        nodes.append(DraftNode(i, f"w{i}", i % width, 1, 0.1, 0.005, None, "unreached"))
    return StepTrace(0, "talon", 5, nodes, [], [TargetChoice(ROOT, 3, "q", 0.2)], [3], ["q"], tau=1, delta=2,
                     tree=TreeStep("talon", {"N": n}))


def specbound_example() -> StepTrace:
    """L = 8, d_max = 4, w_max = 3: token 1 exits at ℓ=2, token 2 at ℓ=3, token 3 hits d_max (no exit)."""
    nodes = [DraftNode(11, "if", ROOT, 0, 0.95, 0.95, 0.9, "accepted"),
             DraftNode(12, " x", 0, 1, 0.92, 0.87, 0.1, "rejected")]

    def ex(node, layers, raw, exit_layer):
        temps = [1 + 1.0 * (1 - l / 8) for l in layers]
        return ExitTrace(node, layers, raw, [r * 0.9 for r in raw], temps, [0] * len(layers), ["t"] * len(layers),
                         exit_layer)
    exits = [ex(0, [1, 2], [0.7, 0.99], 2), ex(1, [1, 2, 3], [0.5, 0.8, 0.97], 3), ex(2, [1, 2, 3, 4], [0.2, 0.3, 0.4, 0.5], None)]
    return StepTrace(0, "specbound", 7, nodes, [0], [TargetChoice(ROOT, 11, "if", 0.9), TargetChoice(0, 13, " y", 0.6)],
                     [11, 13], ["if", " y"], tau=2, delta=1, target_forwards=1, exits=exits, draft_stop="d_max",
                     specbound=SpecBoundStep(alpha=1.0, tau_exit=0.85, d_max=4, w_max=3, min_exit_layer=1,
                                             heads="logit-lens", num_layers=8))
