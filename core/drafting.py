"""Tree-shaping policies: how a draft tree grows from the draft's distributions.

A policy only decides *shape*; where q comes from is the caller's `expand(nodes, tree)`,
one batched draft forward over the frontier per depth level, returning (F, V) probabilities.
That keeps the policies pure and testable on hand-made distributions.

Budget convention, the same for both policies so budgets compare fairly: **N counts drafted
nodes only**; the root (the last committed token, which the target feeds anyway) is not counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from core.trace import ROOT, LevelTrace, PrunedCandidate
from core.tree import DraftTree

Expand = Callable[[list[int], DraftTree], torch.Tensor]  # frontier node ids ([ROOT] first) -> (F, V) q
PRUNED_EXAMPLES = 4  # best cut candidates recorded per depth and reason


@dataclass
class GrowResult:
    tree: DraftTree  # what the target verifies
    pool: DraftTree  # every node the policy created (static: all K×K candidates of each level)
    pool_index: list[int]  # tree node -> pool node
    levels: list[LevelTrace] = field(default_factory=list)
    pruned: list[PrunedCandidate] = field(default_factory=list)  # text filled in by the caller
    forwards: int = 0  # δ
    stop: str = "frontier"  # budget | frontier | depth


def _children(dist: torch.Tensor, frontier: list[int], tree: DraftTree, per_parent: int):
    """Best `per_parent` children of each frontier node, pooled and sorted by p(u) = p(parent)·q.

    Only the Top-m of a row can ever survive, so we never build (F, V) scores.
    Returns flat (score, q, token, parent) tensors/lists, best first.
    """
    m = min(per_parent, dist.shape[-1])
    q, tok = (t.cpu() for t in dist.topk(m, dim=-1))  # (F, m): small, so the policy's logic runs on the CPU
    parent_score = torch.tensor([1.0 if f == ROOT else tree.scores[f] for f in frontier], dtype=q.dtype)
    scores = (parent_score[:, None] * q).flatten()  # (F·m,)
    order = scores.argsort(descending=True, stable=True)
    parents = torch.tensor(frontier).repeat_interleave(m)[order].tolist()
    return scores[order], q.flatten()[order], tok.flatten()[order], parents


def _pruned(scores, q, tok, parents, idx: range, depth: int, reason: str) -> list[PrunedCandidate]:
    return [PrunedCandidate(int(tok[i]), "", parents[i], depth, float(q[i]), float(scores[i]), reason)
            for i in list(idx)[:PRUNED_EXAMPLES]]


def _validate(N: int, K: int) -> None:
    if N < 1:
        raise ValueError(f"N (node budget) must be >= 1 (got {N})")
    if K < 1:
        raise ValueError(f"K (width) must be >= 1 (got {K})")


@dataclass
class TalonPolicy:
    """TALON: root Top-K for the first k levels, then the pooled gate p(u) ≥ μ·m_d under a global budget N."""
    N: int = 60
    K: int = 10
    mu: float = 0.03
    k_init: int = 1
    name: str = "talon"

    def __post_init__(self) -> None:
        _validate(self.N, self.K)
        if not 0 < self.mu <= 1:
            raise ValueError(f"μ (gate ratio) must be in (0, 1] (got {self.mu})")
        if self.k_init < 0:
            raise ValueError(f"k (Top-K levels) must be >= 0 (got {self.k_init})")

    def grow(self, expand: Expand, max_depth: int) -> GrowResult:
        tree = DraftTree()
        res = GrowResult(tree, tree, [])
        frontier = [ROOT]
        for depth in range(max_depth):
            left = self.N - len(tree)
            if left <= 0 or not frontier:
                break
            # 1. one batched draft forward over the frontier
            dist = expand(frontier, tree)  # (F, V)
            res.forwards += 1
            topk_level = depth < self.k_init
            scores, q, tok, parents = _children(dist, frontier, tree, min(self.K, left) if topk_level else left)
            level = LevelTrace(depth, len(frontier), len(scores), 0, anchor=float(scores[0]))
            if topk_level:
                # 2a. Top-K: keep the K best however confident the draft is (guards against over-confidence)
                n_keep = min(self.K, left, len(scores))
                level.cut_by_topk = len(scores) - n_keep
                res.pruned += _pruned(scores, q, tok, parents, range(n_keep, len(scores)), depth, "topk")
            else:
                # 2b. gate: keep exactly the pooled candidates with p(u) ≥ μ·m_d ...
                level.gate = self.mu * level.anchor
                n_pass = int((scores >= level.gate).sum())
                # 3. ... truncated to the remaining budget by score
                n_keep = min(n_pass, left)
                level.cut_by_gate, level.cut_by_budget = len(scores) - n_pass, n_pass - n_keep
                res.pruned += _pruned(scores, q, tok, parents, range(n_keep, n_pass), depth, "budget")
                res.pruned += _pruned(scores, q, tok, parents, range(n_pass, len(scores)), depth, "gate")
            frontier = [tree.add(int(tok[i]), parents[i], float(q[i]), float(scores[i])) for i in range(n_keep)]
            level.kept, level.budget_left = n_keep, self.N - len(tree)
            res.levels.append(level)
        res.stop = "budget" if len(tree) >= self.N else "frontier" if not frontier else "depth"
        res.pool_index = list(range(len(tree)))
        return res


@dataclass
class StaticPolicy:
    """EAGLE-3 style: Top-K at the root, then D levels of K×K expansion keeping the Top-K frontier,
    then a rerank of every generated node by p(u) keeping the best N. δ = D + 1 whatever the context."""
    N: int = 60
    K: int = 10
    depth: int = 8
    name: str = "static"

    def __post_init__(self) -> None:
        _validate(self.N, self.K)
        if self.depth < 0:
            raise ValueError(f"D (depth) must be >= 0 (got {self.depth})")

    def grow(self, expand: Expand, max_depth: int) -> GrowResult:
        pool = DraftTree()
        res = GrowResult(pool, pool, [], stop="depth")
        frontier = [ROOT]
        for depth in range(min(self.depth + 1, max_depth)):
            n_frontier = len(frontier)
            dist = expand(frontier, pool)  # (F, V)
            res.forwards += 1
            scores, q, tok, parents = _children(dist, frontier, pool, self.K)
            # every K×K candidate joins the pool (the final rerank may pick it); the Top-K go on
            new = [pool.add(int(tok[i]), parents[i], float(q[i]), float(scores[i])) for i in range(len(scores))]
            frontier = new[: self.K]
            res.levels.append(LevelTrace(depth, n_frontier, len(new), len(frontier), anchor=float(scores[0]),
                                         cut_by_topk=len(new) - len(frontier)))
        # final rerank: best N by p(u); parents score ≥ children, ties broken by depth, so ancestors come first
        order = sorted(range(len(pool)), key=lambda i: (-pool.scores[i], pool.depths[i], i))
        keep: set[int] = set()
        for i in order:
            if len(keep) == self.N:
                break
            if pool.parents[i] == ROOT or pool.parents[i] in keep:
                keep.add(i)
        res.pool_index = sorted(keep)
        res.tree = pool.subset(res.pool_index)
        for level in res.levels:
            level.budget_left = self.N - len(keep)
        # the best dropped candidates hanging off kept nodes, renumbered to tree indices
        new_index = {old: new for new, old in enumerate(res.pool_index)}
        dropped = [i for i in order if i not in keep and (pool.parents[i] == ROOT or pool.parents[i] in keep)]
        for depth in sorted({pool.depths[i] for i in dropped}):
            best = [i for i in dropped if pool.depths[i] == depth][:PRUNED_EXAMPLES]
            res.pruned += [PrunedCandidate(pool.tokens[i], "", new_index.get(pool.parents[i], ROOT), depth, pool.q[i],
                                           pool.scores[i], "rerank") for i in best]
        return res
