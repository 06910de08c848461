"""Turning logits into the distributions we sample from (temperature, top-p), identically for p and q.

The AR baseline and every verifier call `probs` with the same SamplingConfig, so the target
distribution that speculative decoding must reproduce is exactly the one AR samples from.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core import knobs


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def validate(self) -> None:
        """Ranges from core/knobs.py (a finite temperature: inf would flatten p to uniform)."""
        for k in (knobs.TEMPERATURE, knobs.TOP_P, knobs.SEED):
            k.check(getattr(self, k.name))


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches top_p; renormalise. probs: (..., V)."""
    if top_p >= 1:
        return probs
    sorted_p, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_p.cumsum(-1) - sorted_p  # (..., V) mass of strictly more likely tokens
    sorted_p = torch.where(mass_before < top_p, sorted_p, torch.zeros_like(sorted_p))
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return kept / kept.sum(-1, keepdim=True)


def probs(logits: torch.Tensor, cfg: SamplingConfig) -> torch.Tensor:
    """The distribution a token is drawn from. Greedy: plain softmax (shown, never sampled)."""
    logits = logits.float()
    if cfg.greedy:
        return torch.softmax(logits, -1)
    return top_p_filter(torch.softmax(logits / cfg.temperature, -1), cfg.top_p)


def next_token(logits: torch.Tensor, dist: torch.Tensor, cfg: SamplingConfig, gen: torch.Generator) -> int:
    """Greedy argmax of the logits, or one draw from `dist` (V,)."""
    if cfg.greedy:
        return int(logits.argmax())
    return draw(dist, gen)


def draw(dist: torch.Tensor, gen: torch.Generator) -> int:
    return int(torch.multinomial(dist, 1, generator=gen))


def uniform(gen: torch.Generator, device: torch.device) -> float:
    return float(torch.rand((), generator=gen, device=device))
