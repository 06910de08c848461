"""Draft trees as parent pointers, and the pure helpers that turn them into attention masks and positions.

Node i has parents[i] (ROOT = -1 means "child of the last committed token") and parents
always precede children, so one forward pass over the nodes in index order is valid.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from core.trace import ROOT


@dataclass
class DraftTree:
    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    q: list[float] = field(default_factory=list)  # draft probability of the token given its path
    scores: list[float] = field(default_factory=list)  # p(u): product of q along the path

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, token: int, parent: int, q: float, score: float) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depths.append(0 if parent == ROOT else self.depths[parent] + 1)
        self.q.append(q)
        self.scores.append(score)
        return len(self.tokens) - 1

    def children(self) -> dict[int, dict[int, int]]:
        """parent -> {token: child index}; ROOT included."""
        out: dict[int, dict[int, int]] = {ROOT: {}}
        for i, (tok, par) in enumerate(zip(self.tokens, self.parents)):
            out.setdefault(par, {})[tok] = i
        return out

    def subset(self, keep: list[int]) -> "DraftTree":
        """The tree restricted to `keep` (ancestor-closed), renumbered in the order given (parents first)."""
        new_index = {old: new for new, old in enumerate(keep)}
        sub = DraftTree()
        for old in keep:
            par = self.parents[old]
            sub.add(self.tokens[old], ROOT if par == ROOT else new_index[par], self.q[old], self.scores[old])
        return sub


def path_to(parents: list[int], node: int) -> list[int]:
    """Node indices from the depth-0 ancestor down to `node`."""
    path = []
    while node != ROOT:
        path.append(node)
        node = parents[node]
    return path[::-1]


def ancestor_matrix(parents: list[int], device: torch.device | None = None) -> torch.Tensor:
    """(n, n) bool: [i, j] is True when j is i or an ancestor of i."""
    rows: list[list[bool]] = []
    for i, par in enumerate(parents):
        row = list(rows[par]) if par != ROOT else [False] * len(parents)
        row[i] = True
        rows.append(row)
    return torch.tensor(rows, dtype=torch.bool, device=device).reshape(len(parents), len(parents))


def tree_attention_mask(parents: list[int], prefix_len: int, n_pending: int, device: torch.device) -> torch.Tensor:
    """Mask for one forward over [pending tokens, tree nodes] after `prefix_len` cached slots.

    Returns (P + n, prefix_len + P + n) bool, True = may attend. Pending (committed, not yet
    cached) tokens are causal; each node sees the prefix, all pending tokens, its ancestors, itself.
    """
    P, n = n_pending, len(parents)
    mask = torch.zeros(P + n, prefix_len + P + n, dtype=torch.bool, device=device)
    mask[:, :prefix_len] = True
    mask[:P, prefix_len:prefix_len + P] = torch.ones(P, P, dtype=torch.bool, device=device).tril()
    mask[P:, prefix_len:prefix_len + P] = True
    mask[P:, prefix_len + P:] = ancestor_matrix(parents, device)
    return mask


def tree_positions(depths: list[int], first_node_pos: int) -> list[int]:
    """A node at depth t sits at position first_node_pos + t, whatever its index."""
    return [first_node_pos + d for d in depths]
