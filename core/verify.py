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
