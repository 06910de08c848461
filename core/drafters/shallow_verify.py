"""A tree's verification forward that reuses what a self-drafting drafter computed (core/drafters/self_drafter.py).

The rows [pending tokens, tree nodes] the drafter fed already hold their K/V of layers 0..ℓ−1 and their
state after layer ℓ; only the rows it never fed (the last level's leaves: nothing was drafted below them)
still need layers 0..ℓ−1, at their own scattered cache slots. Then every row runs layers ℓ..L−1 in one
forward with the tree mask. Each row thus goes through every layer once, with the same mask and positions
as a plain verification forward: the logits are the target's own (up to the last bits of a different batch
shape, as with any verification forward).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.drafters.contract import Shallow
from core.model.causal_lm import CausalLM
from core.model.kv_cache import KVCache


@dataclass
class ShallowForward:
    logits: torch.Tensor  # (T, V) fp32
    fed_rows: int  # rows whose first ℓ layers came from the drafter
    layer_passes: int  # decoder layers run (a plain forward runs L)


def verify_with_shallow(target: CausalLM, tokens: list[int], positions: list[int], cache: KVCache, base: int,
                        mask: torch.Tensor, shallow: Shallow) -> ShallowForward:
    """One verification over `tokens` at slots [base, base + T) (mask (T, base + T)); cache.length becomes base + T."""
    dev, ell, T = target.device, shallow.layer, len(tokens)
    pos = torch.tensor(positions, device=dev)  # (T,)
    fed = torch.tensor(shallow.rows, dtype=torch.long, device=dev)  # (F,)
    # 1. the drafter's K/V of layers 0..ℓ−1 go to the fed rows' slots in the target's cache
    cache.k[:ell, :, base + fed] = shallow.k
    cache.v[:ell, :, base + fed] = shallow.v
    h = torch.empty(T, target.config.hidden_size, dtype=shallow.h.dtype, device=dev)  # (T, d): states after ℓ
    h[fed] = shallow.h
    # 2. the rows it never fed: layers 0..ℓ−1 at their own slots (their ancestors' K/V are there already)
    unfed = sorted(set(range(T)) - set(shallow.rows))
    passes = 0
    if unfed:
        u = torch.tensor(unfed, dtype=torch.long, device=dev)  # (U,)
        key_positions = torch.cat([torch.arange(base, device=dev), pos])  # (base + T,)
        h_u = target.embed(torch.tensor([tokens[i] for i in unfed], device=dev))  # (U, d)
        h[u] = target.forward_layers(h_u, pos[u], cache, base, mask[u], 0, ell, slots=base + u,
                                     key_positions=key_positions)
        passes += ell
    # 3. every row through layers ℓ..L−1 in one forward
    h = target.forward_layers(h, pos, cache, base, mask, ell, target.num_layers)
    cache.length = base + T
    return ShallowForward(target.head(h), len(shallow.rows), passes + target.num_layers - ell)
