"""SpecBound's drafting (ACT + BSCS), in the paper's steps: draft one token by running its layers to the
next check until it exits; draft token after token until the block is bounded.

- run to the next check: layers ℓ+1 .. the next checked layer in one call; an earlier block token that exited
  shallower joins the run at the depth it stopped (its exact state there) and goes on with it, so every layer
  drafting computes is exact and verification reuses all of them (LayerSkip's reuse, with ACT's varying exits);
- a check: the exit head's z^(ℓ), annealed at T_ℓ; the token exits when it reaches τ_exit;
- a token that reaches d_max layers without exiting ends the block (a check always happens at d_max, so a
  larger d_max always means a later verdict); so does the w_max-th drafted token, EOS or the length budget.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from core.model.causal_lm import CausalLM, causal_mask
from core.model.exit_heads import ExitHeads
from core.model.kv_cache import KVCache
from core.model.layer_heads import spread
from core.sampling import SamplingConfig, next_token, probs
from core.specbound.annealing import LayerConfidence, exits_at, layer_confidence
from core.specbound.block import Block
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
    record_raw: bool = True


@dataclass
class Group:
    """Block tokens [g0, g1) fed together (the pending tokens, then one drafted token at a time), with RoPE for
    every block token up to g1: earlier tokens that join the group's run take their rows of it."""
    g0: int
    g1: int
    positions: torch.Tensor  # (g1,): block tokens 0..g1−1
    rope: tuple[torch.Tensor, torch.Tensor]  # (cos, sin), each (g1, D): once per group, not once per layer

    @classmethod
    def of(cls, lm: CausalLM, block: Block, g0: int, g1: int, h: torch.Tensor) -> "Group":
        """h: (T_g, d) the group's embeddings (RoPE takes their dtype)."""
        positions = torch.arange(block.base, block.base + g1, device=lm.device)
        return cls(g0, g1, positions, lm.rope(positions, h))


@dataclass
class LayerRun:
    """The tokens running together: block tokens [start, g1) after `layer` layers (the group, and the earlier
    tokens that joined it)."""
    h: torch.Tensor  # (g1 − start, d)
    layer: int
    start: int


@dataclass
class TokenDraft:
    exit: ExitTrace
    logits: torch.Tensor | None  # (V,) z^(ℓ) at its exit layer; None: it reached d_max without exiting


def run_to_next_check(lm: CausalLM, cache: KVCache, plan: DraftPlan, block: Block, g: Group,
                      run: LayerRun) -> LayerRun:
    """Layers run.layer + 1 .. the next check in one call. Earlier block tokens that stopped at run.layer join
    the run first with their exact state there, so the layer's K/V of every earlier token are computed, not
    approximated; the call stops early at the depth where the next earlier token waits, to take it in."""
    layer, start = run.layer, run.start
    joined = start
    while joined > 0 and block.depth[joined - 1] == layer:
        joined -= 1
    h = run.h
    if joined < start:  # (start − joined, d) their states after `layer` layers, exact
        h = torch.cat([torch.stack([block.hidden[j][layer] for j in range(joined, start)]), h])
    upto = next(ell for ell in plan.checks if ell > layer)
    if joined:
        upto = min(upto, block.depth[joined - 1])
    base, T = block.base, g.g1 - joined
    cos, sin = g.rope
    outs: list[torch.Tensor] = []
    h = lm.forward_layers(h, g.positions[joined:], cache, base + joined, causal_mask(base + joined, T, lm.device),
                          layer, upto, hidden=outs, rope=(cos[joined:], sin[joined:]))  # (T, d)
    block.layers += upto - layer
    block.joined += (g.g0 - joined) * (upto - layer)
    for j in range(joined, g.g1):
        block.depth[j] = upto
        block.hidden[j].extend(out[j - joined] for out in outs)
    return LayerRun(h, upto, joined)


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
    run, confs, L = LayerRun(h, 0, g0), [], lm.num_layers
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
        tok = next_token(token.logits, q, sampling, gen)
        block.drafted.append(tok)
        block.q.append(q)
        block.add([tok])
        if tok in lm.eos_ids:
            block.stop = "eos"
            return
        g0, g1 = g1, g1 + 1
