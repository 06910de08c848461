"""Verification of drafted tokens against the target (p target, q draft, as in the papers).

Chains drafted by sampling use the standard rejection rule: accept x with probability
min(1, p(x)/q(x)); on the first rejection draw the bonus token from norm(max(0, p - q)).
That makes every committed token distributed exactly as a draw from p.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from core.sampling import draw, uniform
from core.trace import ROOT, DraftNode, TargetChoice


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
    at, path, choices = ROOT, [], []
    while True:
        row = at + 1  # ROOT's row is 0
        x = int(logits[row].argmax()) if greedy else draw(p[row], gen)
        choices.append((at, x, float(p[row, x])))
        nxt = children.get(at, {}).get(x)
        if nxt is None:
            return TreeVerdict(path, choices)
        path.append(nxt)
        at = nxt


@dataclass
class VerdictRecord:
    """What a verdict means for the trace: every drafted node with its status, the accepted path, and what
    the target chose at each visited point (the last choice is the bonus token)."""
    nodes: list[DraftNode]
    accepted_path: list[int]
    choices: list[TargetChoice]
    residual: bool = False


def record_chain(drafted: list[int], q: list[float], p: torch.Tensor, verdict: ChainVerdict,
                 text_of: Callable[[int], str]) -> VerdictRecord:
    """A chain's verdict as trace records (chain, sampled chain and SpecBound alike): node i has parent
    i − 1, score p(u) = Π q along the chain; q[i] is the draft probability of drafted[i], p (γ + 1, V) the
    target's distributions (row i: at drafted[i]'s parent)."""
    a, score, nodes = verdict.accepted, 1.0, []
    for i, tok in enumerate(drafted):
        score *= q[i]
        status = "accepted" if i < a else "rejected" if i == a else "unreached"
        nodes.append(DraftNode(tok, text_of(tok), i - 1 if i else ROOT, i, q[i], score, float(p[i, tok]), status))
    choices = [TargetChoice(i - 1 if i else ROOT, drafted[i], nodes[i].text, nodes[i].p) for i in range(a)]
    choices.append(TargetChoice(a - 1 if a else ROOT, verdict.bonus, text_of(verdict.bonus),
                                float(p[a, verdict.bonus])))
    return VerdictRecord(nodes, list(range(a)), choices, verdict.residual)
