"""SpecBound's drafting (ACT + BSCS), in the paper's steps: draft one token by running its layers to the
next check until it exits; draft token after token until the block is bounded.

- run to the next check: layers ℓ+1 .. the next checked layer in one call (one layer at a time where an
  earlier block token's K/V stop short, propagating them from its exit state);
- a check: the exit head's z^(ℓ), annealed at T_ℓ; the token exits when it reaches τ_exit;
- a token that reaches d_max layers without exiting ends the block (a check always happens at d_max, so a
  larger d_max always means a later verdict); so does the w_max-th drafted token, EOS or the length budget.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from core.act import LayerConfidence, exits_at, layer_confidence
from core.exit_heads import ExitHeads
from core.kv_cache import KVCache
from core.layer_heads import spread
from core.model import CausalLM
from core.sampling import SamplingConfig, choose, probs
from core.specbound_block import Block, draft_mask, propagate_kv
from core.trace import ExitTrace


@dataclass(frozen=True)
class DraftPlan:
    """What bounds one step's drafting and where it checks."""
    heads: ExitHeads
    alpha: float
    tau_exit: float
    d_max: int  # ≤ L
    checks: tuple[int, ...]  # ascending layers with an exit check; the last is d_max
    vocab: torch.Tensor | None  # (V_exit,) sorted ids the checks score; None: every token
    w_limit: float  # drafted tokens allowed this step (w_max and the length budget)
    w_max: int | None
    propagate: bool = True  # deeper drafts see shallower-exited tokens through propagated K/V (else masked)
    record_raw: bool = True


@dataclass
class Group:
    """Block tokens [g0, g1) fed together (the pending tokens, then one drafted token at a time)."""
    g0: int
    g1: int
    positions: torch.Tensor  # (T_g,)
    rope: tuple[torch.Tensor, torch.Tensor]  # (cos, sin), each (T_g, D): once per group, not once per layer

    @classmethod
    def of(cls, lm: CausalLM, block: Block, g0: int, g1: int, h: torch.Tensor) -> "Group":
        """h: (T_g, d) the group's embeddings (RoPE takes their dtype)."""
        positions = torch.arange(block.base + g0, block.base + g1, device=lm.device)
        return cls(g0, g1, positions, lm.rope(positions, h))


@dataclass
class LayerRun:
    h: torch.Tensor  # (T_g, d): the group's states after `layer` layers
    layer: int


@dataclass
class TokenDraft:
    exit: ExitTrace
    logits: torch.Tensor | None  # (V,) z^(ℓ) at its exit layer; None: it reached d_max without exiting


def run_to_next_check(lm: CausalLM, cache: KVCache, plan: DraftPlan, block: Block, g: Group,
                      run: LayerRun) -> LayerRun:
    """Layers run.layer + 1 .. the next check at once, or only the next layer while an earlier block
    token's K/V stop short of it (that token's K/V for it are propagated from its exit state first)."""
    layer = run.layer
    upto = next(ell for ell in plan.checks if ell > layer)
    if any(block.kv_depth[j] < upto for j in range(g.g0)):
        upto = layer + 1
    stale = [j for j in range(g.g0) if block.kv_depth[j] <= layer] if plan.propagate else []
    if stale:
        states = torch.stack([block.hidden[j][block.depth[j]] for j in stale])  # (n, d)
        propagate_kv(lm, cache, layer, states, block.base + torch.tensor(stale, device=lm.device))
        block.propagated += len(stale)
        for j in stale:
            block.kv_depth[j] = layer + 1
    mask = draft_mask(block, g.g0, g.g1, layer + 1, lm.device)
    outs: list[torch.Tensor] = []
    h = lm.forward_layers(run.h, g.positions, cache, block.base + g.g0, mask, layer, upto, hidden=outs,
                          rope=g.rope)  # (T_g, d): layers layer+1..upto (1-based)
    block.layers += upto - layer
    for j in range(g.g0, g.g1):
        block.depth[j] = block.kv_depth[j] = upto
        block.hidden[j].extend(out[j - g.g0] for out in outs)
    return LayerRun(h, upto)


def exit_trace(node: int, confs: list[LayerConfidence], text_of: Callable[[int], str],
               exit_layer: int | None) -> ExitTrace:
    return ExitTrace(node=node, layers=[c.layer for c in confs], raw_conf=[c.raw for c in confs],
                     annealed_conf=[c.annealed for c in confs], temperature=[c.temperature for c in confs],
                     top_ids=[c.top_id for c in confs], top_texts=[text_of(c.top_id) for c in confs],
                     exit_layer=exit_layer)


def draft_one_token(lm: CausalLM, cache: KVCache, plan: DraftPlan, block: Block, g0: int, g1: int,
                    text_of: Callable[[int], str]) -> TokenDraft:
    """Feed block tokens [g0, g1) through their layers, checking at each exit layer, until the last of them
    exits (ACT) or reaches d_max (BSCS). Layer L, where there is nothing deeper, always exits (ours: the
    token's draft is then already the target's own choice)."""
    h = lm.embed(torch.tensor(block.tokens[g0:g1], device=lm.device))  # (T_g, d)
    g = Group.of(lm, block, g0, g1, h)
    for j in range(g0, g1):
        block.hidden[j].append(h[j - g0])
    run, confs, L = LayerRun(h, 0), [], lm.num_layers
    while run.layer < plan.d_max:
        run = run_to_next_check(lm, cache, plan, block, g, run)
        if run.layer not in plan.checks:
            continue
        z, ids = plan.heads.scores(lm, run.layer, run.h[-1:], plan.vocab)  # (1, k) over the ids (k,) that may exit
        block.head_evals += 1
        confs.append(layer_confidence(z[0], run.layer, L, plan.alpha, raw=plan.record_raw, ids=ids))
        if exits_at(confs[-1], plan.tau_exit) or run.layer == L:  # the whole (V,) z only for the token that exits
            return TokenDraft(exit_trace(len(block.drafted), confs, text_of, run.layer), spread(z, ids, lm.vocab_size)[0])
    return TokenDraft(exit_trace(len(block.drafted), confs, text_of, None), None)


def draft_block(lm: CausalLM, cache: KVCache, plan: DraftPlan, block: Block, sampling: SamplingConfig,
                gen: torch.Generator, text_of: Callable[[int], str]) -> None:
    """Draft token after token until the block is bounded; block.stop says why (w_max, length, d_max, eos).
    Each drafted token is drawn from q = softmax(z^(ℓ)) at its exit layer (its argmax when greedy)."""
    g0, g1 = 0, len(block.tokens)
    while True:
        if len(block.drafted) >= plan.w_limit:
            block.stop = "w_max" if plan.w_max and len(block.drafted) >= plan.w_max else "length"
            return
        token = draft_one_token(lm, cache, plan, block, g0, g1, text_of)
        block.exits.append(token.exit)
        if token.logits is None:
            block.stop = "d_max"
            return
        q = probs(token.logits, sampling)  # (V,)
        tok = choose(token.logits, q, sampling, gen)
        block.drafted.append(tok)
        block.q.append(q)
        block.add([tok])
        if tok in lm.eos_ids:
            block.stop = "eos"
            return
        g0, g1 = g1, g1 + 1
