"""SpecBound's block: the tokens of one step, how deep each was computed, and the exact verification pass.

Exactness. A token's layer-ℓ output is exact only if its own input to ℓ is exact and every earlier token's
layer-ℓ K/V are exact. While drafting, a token at layer ℓ sees earlier block tokens that exited below ℓ
through K/V computed from their exit states (CALM's state propagation: cheap and inexact, for drafting
only). So token j's first e_j layers are exact only up to x_j = min(e_0, ..., e_j) (a prefix minimum of
the drafting depths e). Every token keeps its hidden states h^0..h^(e_j).

Verification is one staggered parallel pass: at layer i it runs the suffix of block tokens with x_j ≤ i
(x is non-increasing, so it is a suffix that grows as i rises), each token joining with its stored exact
state h^(x_j); tokens with x_j > i keep their exact K/V in the cache. The pass starts at the shallowest
inexact layer min_j x_j and computes every layer of every token that was not computed exactly, so the
final logits are the target's own (up to the last-bit noise of a different batch shape, as with any
verification forward).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from core.kv_cache import KVCache
from core.model import CausalLM, causal_mask
from core.trace import ExitTrace


@dataclass
class Block:
    """The tokens of one step: pending (committed, not cached) then drafted; token j sits at slot base + j."""
    base: int
    tokens: list[int]
    n_pending: int
    depth: list[int] = field(default_factory=list)  # e_j: layers computed while drafting
    kv_depth: list[int] = field(default_factory=list)  # layers whose K/V the slot holds (computed or propagated)
    hidden: list[list[torch.Tensor]] = field(default_factory=list)  # hidden[j][ℓ]: (d,) after ℓ layers
    drafted: list[int] = field(default_factory=list)
    q: list[torch.Tensor] = field(default_factory=list)  # (V,) the distribution drafted[i] came from
    exits: list[ExitTrace] = field(default_factory=list)
    stop: str = ""
    layers: int = 0  # layer passes spent drafting
    head_evals: int = 0
    propagated: int = 0  # (token, layer) K/V pairs propagated from exit states

    @classmethod
    def start(cls, base: int, pending: list[int]) -> "Block":
        block = cls(base, [], len(pending))
        block.add(pending)
        return block

    def add(self, tokens: list[int]) -> None:
        self.tokens += tokens
        self.depth += [0] * len(tokens)
        self.kv_depth += [0] * len(tokens)
        self.hidden += [[] for _ in tokens]

    @property
    def exact_depth(self) -> list[int]:
        """x_j = min(e_0, ..., e_j): how many layers of token j were computed exactly."""
        return [min(self.depth[: j + 1]) for j in range(len(self.tokens))]


def propagate_kv(lm: CausalLM, cache: KVCache, i: int, h: torch.Tensor, slots: torch.Tensor) -> None:
    """Layer i's K/V for tokens that exited below it, from their exit states h (n, d) (CALM's state
    propagation): a cheap stand-in so deeper drafts still see them. Slots equal positions here."""
    cos, sin = lm.rope(slots, h)  # (n, D)
    k, v = lm.project_kv(i, lm.input_norm(i, h), cos, sin)  # each (H_kv, n, D)
    cache.k[i, :, slots] = k
    cache.v[i, :, slots] = v


def draft_mask(block: Block, g0: int, g1: int, layer: int, device: torch.device) -> torch.Tensor:
    """(T_g, base + g1) for running layer `layer` (1-based) on block tokens [g0, g1): the cached prefix,
    earlier block tokens whose slot holds K/V of this layer, and the group itself causally. Built in place
    (drafting asks for one per layer run, mostly for one token, where the group's causal part is all True)."""
    base, n = block.base, g1 - g0
    mask = torch.ones(n, base + g1, dtype=torch.bool, device=device)  # (T_g, base + g1)
    short = [j for j in range(g0) if block.kv_depth[j] < layer]
    if short:
        mask[:, [base + j for j in short]] = False
    if n > 1:
        mask[:, base + g0:] = torch.ones(n, n, dtype=torch.bool, device=device).tril()
    return mask


@dataclass
class VerifyPass:
    """What the staggered pass computed: the final states of the rows that predict drafted[i] and the bonus."""
    rows: torch.Tensor  # (w + 1, d): block tokens n_pending − 1 .. end after all L layers
    layers: int  # layer passes run
    from_layer: int  # the shallowest layer it ran (the draft's exact layers below it were reused)
    states: dict[int, tuple[int, torch.Tensor]] = field(default_factory=dict)  # kept for the page only:
    # layer ℓ -> (first block token in the pass at ℓ, (T, d) their states after ℓ layers)


def _joiners(lm: CausalLM, block: Block, lo: int, hi: int, i: int) -> torch.Tensor:
    """(hi − lo, d) the exact states entering layer i of block tokens lo..hi−1 (at i = 0, their embeddings:
    that includes the last drafted token, which drafting never fed)."""
    if i == 0:
        return lm.embed(torch.tensor(block.tokens[lo:hi], device=lm.device))
    return torch.stack([block.hidden[j][i] for j in range(lo, hi)])


def staggered_verify(lm: CausalLM, cache: KVCache, block: Block, keep: bool = False) -> VerifyPass:
    """Every layer of every block token that was not computed exactly, each token joining the pass at its
    exact depth x_j; afterwards every block slot holds exact K/V. `keep`: also hand back every layer's states
    (only the page reads them: core/specbound_display.py)."""
    L, n, base = lm.num_layers, len(block.tokens), block.base
    x = block.exact_depth
    first = x[-1] if n else L
    run: torch.Tensor | None = None
    start = n  # block tokens start.. are in the running pass; earlier ones join when their exact depth is reached
    i, states = first, {}
    while i < L:
        new_start = start
        while new_start > 0 and x[new_start - 1] <= i:
            new_start -= 1
        if new_start < start:  # these tokens' states are exact up to layer i: they join the pass here
            joiners = _joiners(lm, block, new_start, start, i)  # (n_join, d)
            run = joiners if run is None else torch.cat([joiners, run])
            start = new_start
        upto = min(L, x[start - 1]) if start else L  # the next token to join does so at layer upto
        positions = torch.arange(base + start, base + n, device=lm.device)  # (T,)
        mask = causal_mask(base + start, n - start, lm.device)  # (T, base + n)
        outs: list[torch.Tensor] | None = [] if keep else None
        run = lm.forward_layers(run, positions, cache, base + start, mask, i, upto, hidden=outs)  # (T, d): i..upto-1
        for k, out in enumerate(outs or []):
            states[i + k + 1] = (start, out)
        i = upto
    exact = [torch.stack([block.hidden[j][L] for j in range(start)])] if start else []  # computed in full
    rows = torch.cat(exact + ([run] if run is not None else []))  # (n, d)
    return VerifyPass(rows[block.n_pending - 1:], L - first, first, states)
