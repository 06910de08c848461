"""Tree-shaping policies: how a draft tree grows from the draft's distributions.

A policy only decides *shape*; where q comes from is the caller's `expand(nodes, tree)`,
one batched draft forward over the frontier per depth level, returning (F, V) probabilities
(or a `ColumnQ` over a drafter's own vocabulary, for the trees).
That keeps the policies pure and testable on hand-made distributions.

Budget convention, the same for both policies so budgets compare fairly: **N counts drafted
nodes only**; the root (the last committed token, which the target feeds anyway) is not counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable

import torch

from core import knobs
from core.draft_tree import DraftTree
from core.trace import ROOT, LevelTrace, PrunedCandidate



@dataclass
class ColumnQ:
    """q over part of the vocabulary: rows (F, C) for the target ids `columns` (C,), the rest 0. What a drafter
    with a reduced vocabulary gives a tree: its Top-m never needs the (F, V) row (a third of the work on
    SmolLM2's head, and no (F, V) tensors to allocate)."""
    q: torch.Tensor  # (F, C)
    columns: torch.Tensor  # (C,)

    @property
    def shape(self) -> torch.Size:
        return self.q.shape

    def __getitem__(self, row: int) -> torch.Tensor:
        """A row's C proposable entries; the other V − C are 0 and never pass a gate μ·m_d > 0."""
        return self.q[row]

    def topk(self, m: int, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
        """(F, m) probabilities and their target ids, best first."""
        q, col = self.q.topk(m, dim=dim)
        return q, self.columns[col]


# frontier node ids ([ROOT] first) -> (F, V) q (a ColumnQ for the trees), or None when the drafter has no room left
Expand = Callable[[list[int], DraftTree], "torch.Tensor | ColumnQ | None"]
Pick = Callable[[torch.Tensor], int]  # a chain's choice from one q row (V,): argmax, or one draw
PRUNED_EXAMPLES = 4  # best cut candidates recorded per depth and reason


@dataclass
class GrowResult:
    tree: DraftTree  # what the target verifies
    pool: DraftTree  # every node the policy created (static: all K×K candidates of each level)
    pool_index: list[int]  # tree node -> pool node
    levels: list[LevelTrace] = field(default_factory=list)
    pruned: list[PrunedCandidate] = field(default_factory=list)  # text filled in by the caller
    forwards: int = 0  # δ
    stop: str = "frontier"  # budget | frontier | depth | context (no room left in a cache)
    q_rows: list[torch.Tensor] = field(default_factory=list)  # chain: the full q each token was drawn from


def _children(dist: torch.Tensor | ColumnQ, frontier: list[int], tree: DraftTree, per_parent: int):
    """Best `per_parent` children of each frontier node, pooled and sorted by p(u) = p(parent)·q.

    Only the Top-m of a row can ever survive, so we never build (F, V) scores.
    Returns flat (score, q, token, parent) tensors/lists, best first, and (F,) the score of each row's m-th
    child (the last one scored: a gate that passes it may pass children that were not scored).
    """
    m = min(per_parent, dist.shape[-1])
    q, tok = (t.cpu() for t in dist.topk(m, dim=-1))  # (F, m): small, so the policy's logic runs on the CPU
    parent_score = torch.tensor([1.0 if f == ROOT else tree.scores[f] for f in frontier], dtype=q.dtype)
    scores = (parent_score[:, None] * q).flatten()  # (F·m,)
    order = scores.argsort(descending=True, stable=True)
    order = order[q.flatten()[order] > 0]  # a drafter that cannot propose a token gives it q = 0
    parents = torch.tensor(frontier).repeat_interleave(m)[order].tolist()
    return scores[order], q.flatten()[order], tok.flatten()[order], parents, parent_score * q[:, -1]


def _passing_unscored(dist: torch.Tensor | ColumnQ, frontier: list[int], tree: DraftTree, edge: torch.Tensor, m: int,
                      gate: float) -> int:
    """Children below each parent's m scored ones that pass the gate too (all of them cut by the budget),
    counted only on the rows whose m-th child passes: a level's cuts then add up without scoring (F, V)."""
    total = 0
    for row in (edge >= gate).nonzero().flatten().tolist():
        parent = frontier[row]
        scale = 1.0 if parent == ROOT else tree.scores[parent]
        total += int((dist[row] * scale >= gate).sum()) - m
    return total


def _pruned(scores, q, tok, parents, idx: range, depth: int, reason: str) -> list[PrunedCandidate]:
    return [PrunedCandidate(int(tok[i]), "", parents[i], depth, float(q[i]), float(scores[i]), reason)
            for i in list(idx)[:PRUNED_EXAMPLES]]


class Declared:
    """A policy's knobs are its dataclass fields named as declared in core/knobs.py: each is checked by its own
    declaration, so a new knob needs a field and a declaration, nothing else."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in knobs.ALL_KNOBS:
                setattr(self, f.name, knobs.ALL_KNOBS[f.name].check(getattr(self, f.name)))


@dataclass
class TalonPolicy(Declared):
    """TALON: root Top-K for the first k levels, then the pooled gate p(u) ≥ μ·m_d under a global budget N."""
    N: int = knobs.N.default
    K: int = knobs.K.default
    mu: float = knobs.MU.default
    k_init: int = knobs.K_INIT.default
    name: str = "talon"

    @property
    def scratch(self) -> int:
        """Most nodes one step writes into a drafter's cache."""
        return self.N

    def grow(self, expand: Expand, max_depth: int, max_nodes: int | None = None, pick: Pick | None = None) -> GrowResult:
        """max_nodes: room left in the target's cache this step (the budget never exceeds it)."""
        N = self.N if max_nodes is None else min(self.N, max_nodes)
        tree = DraftTree()
        res = GrowResult(tree, tree, [])
        frontier = [ROOT]
        for depth in range(max_depth):
            left = N - len(tree)
            if left <= 0 or not frontier:
                break
            # 1. one batched draft forward over the frontier
            dist = expand(frontier, tree)  # (F, V)
            if dist is None:
                res.stop = "context"
                break
            res.forwards += 1
            frontier = self._level(dist, frontier, tree, depth, left, res)
        if res.stop != "context":
            res.stop = "budget" if len(tree) >= N else "frontier" if not frontier else "depth"
        res.pool_index = list(range(len(tree)))
        return res

    def _level(self, dist: torch.Tensor, frontier: list[int], tree: DraftTree, depth: int, left: int,
               res: GrowResult) -> list[int]:
        """One depth: the pooled children of the frontier, kept by Top-K (the first k levels) or by the gate,
        truncated to the `left` budget; returns the next frontier and records the level."""
        topk_level = depth < self.k_init
        m = min(self.K, left) if topk_level else left
        scores, q, tok, parents, edge = _children(dist, frontier, tree, m)
        if not len(scores):  # the drafter proposed nothing
            return []
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
            unscored = _passing_unscored(dist, frontier, tree, edge, min(m, dist.shape[-1]), level.gate)
            level.cut_by_gate, level.cut_by_budget = len(scores) - n_pass, n_pass - n_keep + unscored
            res.pruned += _pruned(scores, q, tok, parents, range(n_keep, n_pass), depth, "budget")
            res.pruned += _pruned(scores, q, tok, parents, range(n_pass, len(scores)), depth, "gate")
        level.kept, level.budget_left = n_keep, left - n_keep  # N − |T| of this step's budget
        res.levels.append(level)
        return [tree.add(int(tok[i]), parents[i], float(q[i]), float(scores[i])) for i in range(n_keep)]


@dataclass
class StaticPolicy(Declared):
    """EAGLE-3 style: Top-K at the root, then D levels of K×K expansion keeping the Top-K frontier,
    then a rerank of every generated node by p(u) keeping the best N. δ = D + 1 whatever the context."""
    N: int = knobs.N.default
    K: int = knobs.K.default
    depth: int = knobs.DEPTH.default
    name: str = "static"

    @property
    def scratch(self) -> int:
        return max(self.N, self.K * (self.depth + 1))

    def grow(self, expand: Expand, max_depth: int, max_nodes: int | None = None, pick: Pick | None = None) -> GrowResult:
        N = self.N if max_nodes is None else min(self.N, max_nodes)
        pool = DraftTree()
        res = GrowResult(pool, pool, [], stop="depth")
        frontier = [ROOT]
        for depth in range(min(self.depth + 1, max_depth)):
            if not frontier:
                res.stop = "frontier"
                break
            n_frontier = len(frontier)
            dist = expand(frontier, pool)  # (F, V)
            if dist is None:
                res.stop = "context"
                break
            res.forwards += 1
            scores, q, tok, parents, _ = _children(dist, frontier, pool, self.K)
            if not len(scores):
                res.stop = "frontier"
                break
            # every K×K candidate joins the pool (the final rerank may pick it); the Top-K go on
            new = [pool.add(int(tok[i]), parents[i], float(q[i]), float(scores[i])) for i in range(len(scores))]
            frontier = new[: self.K]
            res.levels.append(LevelTrace(depth, n_frontier, len(new), len(frontier), anchor=float(scores[0]),
                                         cut_by_topk=len(new) - len(frontier)))
        # final rerank: best N by p(u); parents score ≥ children, ties broken by depth, so ancestors come first
        order = sorted(range(len(pool)), key=lambda i: (-pool.scores[i], pool.depths[i], i))
        keep: set[int] = set()
        for i in order:
            if len(keep) == N:
                break
            if pool.parents[i] == ROOT or pool.parents[i] in keep:
                keep.add(i)
        res.pool_index = sorted(keep)
        res.tree = pool.subset(res.pool_index)
        for level in res.levels:
            level.budget_left = N - len(keep)
        # the best dropped candidates hanging off kept nodes, renumbered to tree indices
        new_index = {old: new for new, old in enumerate(res.pool_index)}
        dropped = [i for i in order if i not in keep and (pool.parents[i] == ROOT or pool.parents[i] in keep)]
        for depth in sorted({pool.depths[i] for i in dropped}):
            best = [i for i in dropped if pool.depths[i] == depth][:PRUNED_EXAMPLES]
            res.pruned += [PrunedCandidate(pool.tokens[i], "", new_index.get(pool.parents[i], ROOT), depth, pool.q[i],
                                           pool.scores[i], "rerank") for i in best]
        return res


@dataclass
class ChainPolicy(Declared):
    """Chain drafting, a K = 1 tree: one token per level, picked by the caller's `pick` (argmax, or one
    draw from q for sampled chains, whose q rows are kept for the rejection rule)."""
    gamma: int = knobs.GAMMA.default
    name: str = "chain"

    @property
    def scratch(self) -> int:
        return self.gamma

    def grow(self, expand: Expand, max_depth: int, max_nodes: int | None = None, pick: Pick | None = None) -> GrowResult:
        pick = pick or (lambda row: int(row.argmax()))
        gamma = min(self.gamma, max_depth, self.gamma if max_nodes is None else max_nodes)
        tree = DraftTree()
        res = GrowResult(tree, tree, [], stop="gamma")
        frontier = [ROOT]
        for depth in range(gamma):
            dist = expand(frontier, tree)  # (1, V)
            if dist is None:
                res.stop = "context"
                break
            res.forwards += 1
            q = dist[0]
            if not float(q.max()) > 0:  # the drafter has nothing to propose
                res.stop = "frontier"
                break
            tok = pick(q)
            parent = frontier[0]
            score = float(q[tok]) * (1.0 if parent == ROOT else tree.scores[parent])
            frontier = [tree.add(tok, parent, float(q[tok]), score)]
            res.q_rows.append(q)
            res.levels.append(LevelTrace(depth, 1, 1, 1, anchor=score))
        if res.stop == "gamma" and gamma < self.gamma:
            res.stop = "length"
        res.pool_index = list(range(len(tree)))
        return res
