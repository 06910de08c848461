"""SpecBound's block: the tokens of one step, how deep each was computed, and the exact verification pass.

Exactness. A token's layer-ℓ output is exact only if its own input to ℓ is exact and every earlier token's
layer-ℓ K/V are exact. Drafting keeps both true (core/specbound/draft.py): when a token goes deeper than an
earlier block token that exited shallower, that token joins the run at its own depth and is computed on with
it. So each token's depth e_j (layers computed while drafting) is the deepest exit at or after it, e is
non-increasing along the block, and every state drafting kept is exact. Every token keeps its hidden states
h^0..h^(e_j).

Verification is one staggered parallel pass: at layer i it runs the suffix of block tokens with e_j ≤ i (a
suffix that grows as i rises), each token joining with its stored state h^(e_j); tokens with e_j > i keep
their K/V in the cache. It starts at the last token's depth (0 when drafting never fed it) and runs every layer
of every token that drafting did not, so the final logits are the target's own (up to the last-bit noise of a
different batch shape, as with any verification forward) and no layer is computed twice.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from core.model.causal_lm import CausalLM, causal_mask
from core.model.kv_cache import KVCache
from core.trace import ExitTrace


@dataclass
class Block:
    """The tokens of one step: pending (committed, not cached) then drafted; token j sits at slot base + j."""
    base: int
    tokens: list[int]
    n_pending: int
    depth: list[int] = field(default_factory=list)  # e_j: layers computed (exactly) while drafting
    hidden: list[list[torch.Tensor]] = field(default_factory=list)  # hidden[j][ℓ]: (d,) after ℓ layers
    drafted: list[int] = field(default_factory=list)
    q: list[torch.Tensor] = field(default_factory=list)  # (V,) the distribution drafted[i] came from
    exits: list[ExitTrace] = field(default_factory=list)
    stop: str = ""
    layers: int = 0  # layer passes spent drafting
    head_evals: int = 0
    joined: int = 0  # (token, layer) pairs drafting computed for earlier tokens carried along by a deeper one

    @classmethod
    def start(cls, base: int, pending: list[int]) -> "Block":
        block = cls(base, [], len(pending))
        block.add(pending)
        return block

    def add(self, tokens: list[int]) -> None:
        self.tokens += tokens
        self.depth += [0] * len(tokens)
        self.hidden += [[] for _ in tokens]


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
    """Every layer of every block token that drafting did not compute, each token joining the pass at its
    depth e_j; afterwards every block slot holds exact K/V. `keep`: also hand back every layer's states
    (only the page reads them: core/specbound/display.py)."""
    L, n, base = lm.num_layers, len(block.tokens), block.base
    e = block.depth  # e_j, non-increasing (drafting carries shallower tokens along)
    first = e[-1] if n else L
    run: torch.Tensor | None = None
    start = n  # block tokens start.. are in the running pass; earlier ones join when their exact depth is reached
    i, states = first, {}
    while i < L:
        new_start = start
        while new_start > 0 and e[new_start - 1] <= i:
            new_start -= 1
        if new_start < start:  # these tokens' states are exact up to layer i: they join the pass here
            joiners = _joiners(lm, block, new_start, start, i)  # (n_join, d)
            run = joiners if run is None else torch.cat([joiners, run])
            start = new_start
        upto = min(L, e[start - 1]) if start else L  # the next token to join does so at layer upto
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
