"""What only the page shows of a SpecBound step: every layer's exit-head confidence for each drafted token, also
at the layers where no check ran (the heatmap draws them faintly beside the checked cells), so a visitor sees
where a token *would* have crossed τ_exit and how its confidence moves with depth.

Why it is read after the step and from states the step already has: drafting and verification must stay
exactly as they are (the output equals AR, and their timers measure only the method). A token's layers up to
its last check come from its own drafting states (what the checks saw); deeper layers from the verification's
exact states (what running on would have given). Nothing here writes a cache or feeds anything back; the
step times it separately (StepTrace.display_ms) so its timings leave it out, and the bench never asks for it.
"""
from __future__ import annotations

from typing import Callable

import torch

from core.model.causal_lm import CausalLM
from core.specbound.annealing import act_temperature
from core.specbound.block import Block, VerifyPass
from core.specbound.draft import DraftPlan


def state_at(block: Block, passed: VerifyPass, j: int, layer: int) -> torch.Tensor | None:
    """(d,) block token j's state after `layer` layers: its drafting state up to its drafting depth, else the
    verification pass's (None where neither computed it)."""
    if layer <= block.depth[j] and layer < len(block.hidden[j]):
        return block.hidden[j][layer]
    start, out = passed.states.get(layer, (len(block.tokens), None))
    return out[j - start] if out is not None and j >= start else None


def fill_unchecked(lm: CausalLM, plan: DraftPlan, block: Block, passed: VerifyPass,
                   text_of: Callable[[int], str]) -> None:
    """Fill each exit record's unchecked_* fields: exits[i] is about block token n_pending − 1 + i (the state
    that predicts drafted[i]); one batched head call per layer."""
    L = lm.num_layers
    rows = [block.n_pending - 1 + i for i in range(len(block.exits))]
    for layer in range(1, L + 1):
        wanted = [(e, state_at(block, passed, j, layer)) for e, j in zip(block.exits, rows) if layer not in e.layers]
        wanted = [(e, h) for e, h in wanted if h is not None]
        if not wanted:
            continue
        z = plan.heads.logits(lm, layer, torch.stack([h for _, h in wanted]), plan.vocab).float()  # (n, V)
        t = act_temperature(layer, L, plan.alpha)
        raw = torch.softmax(z, -1).max(-1).values.tolist()  # (n,)
        annealed = torch.softmax(z / t, -1).max(-1).values.tolist()  # (n,)
        top = z.argmax(-1).tolist()  # (n,)
        for (e, _), r, a, tok in zip(wanted, raw, annealed, top):
            e.unchecked_layers.append(layer)
            e.unchecked_raw.append(min(1.0, r))
            e.unchecked_annealed.append(min(1.0, a))
            e.unchecked_top_texts.append(text_of(tok))
