"""Verification of drafted tokens against the target (p target, q draft, as in the papers).

Chains drafted by sampling use the standard rejection rule: accept x with probability
min(1, p(x)/q(x)); on the first rejection draw the bonus token from norm(max(0, p - q)).
That makes every committed token distributed exactly as a draw from p.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.sampling import draw, uniform


@dataclass
class ChainVerdict:
    accepted: int  # leading drafted tokens accepted
    bonus: int  # token the target adds after them
    residual: bool = False  # bonus drawn from the residual max(0, p - q)


def verify_chain_greedy(drafted: list[int], target_logits: torch.Tensor) -> ChainVerdict:
    """target_logits: (γ + 1, V); row i is the target's prediction for drafted[i] (row γ: after all)."""
    choice = target_logits.argmax(-1).tolist()  # (γ + 1,)
    n = 0
    while n < len(drafted) and drafted[n] == choice[n]:
        n += 1
    return ChainVerdict(n, choice[n])


def verify_chain_sampling(drafted: list[int], q: torch.Tensor, p: torch.Tensor, gen: torch.Generator) -> ChainVerdict:
    """q: (γ, V) the draft distributions drafted[i] was drawn from; p: (γ + 1, V) the target's."""
    for i, x in enumerate(drafted):
        if uniform(gen, p.device) * q[i, x] >= p[i, x]:  # reject with probability 1 - min(1, p/q)
            residual = (p[i] - q[i]).clamp_min(0)
            total = residual.sum()
            if total <= 0:  # p == q up to rounding: any rejection is a measure-zero event
                return ChainVerdict(i, draw(p[i], gen), residual=False)
            return ChainVerdict(i, draw(residual / total, gen), residual=True)
    return ChainVerdict(len(drafted), draw(p[len(drafted)], gen))


@dataclass
class TreeVerdict:
    path: list[int]  # accepted node indices, root downwards
    choices: list[tuple[int, int, float]]  # (at: ROOT or node, token the target picked, its probability)
    residual: bool = False  # sampled chains: the bonus came from the residual max(0, p - q)

    @property
    def bonus(self) -> int:
        return self.choices[-1][1]


def verify_tree(children: dict[int, dict[int, int]], logits: torch.Tensor, p: torch.Tensor, greedy: bool,
                gen: torch.Generator) -> TreeVerdict:
    """Walk the tree from the root with the target's own choices.

    logits, p: (1 + n, V); row 0 is the root (the last committed token), row 1 + i is node i.
    At each visited node the target picks x (argmax, or x ~ p); if x is a drafted child we
    descend, otherwise x is the bonus token and the step ends. Children are chosen
    deterministically (Top-K / gate), so every committed token is exactly a draw from p.
    """
    at, path, choices = -1, [], []
    while True:
        row = at + 1
        x = int(logits[row].argmax()) if greedy else draw(p[row], gen)
        choices.append((at, x, float(p[row, x])))
        nxt = children.get(at, {}).get(x)
        if nxt is None:
            return TreeVerdict(path, choices)
        path.append(nxt)
        at = nxt
