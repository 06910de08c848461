"""SpecBound's annealed confidence threshold (ACT): where a drafted token may exit, and what a check costs.

At layer ℓ of L the exit head's logits z^(ℓ) are read at temperature T_ℓ = 1 + α(1 − ℓ/L): shallow layers,
whose confidence was never trained and runs high on wrong tokens, are deflated more; the last layer not at
all. A token exits at the first checked layer where max softmax(z^(ℓ) / T_ℓ) ≥ τ_exit.
"""
from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import dataclass

import torch

from core.auto.cost_model import median_ms
from core.engine import sync
from core.model.causal_lm import CausalLM
from core.model.exit_heads import ExitHeads, exit_vocab, logit_lens
from core.model.layer_heads import LayerHeads


def act_temperature(layer: int, num_layers: int, alpha: float) -> float:
    """T_ℓ = 1 + α(1 − ℓ/L): shallow layers are deflated more, the last layer not at all."""
    return 1.0 + alpha * (1.0 - layer / num_layers)


@dataclass
class LayerConfidence:
    layer: int
    temperature: float  # T_ℓ
    raw: float  # max softmax(z^(ℓ))
    annealed: float  # max softmax(z^(ℓ) / T_ℓ)
    top_id: int


def layer_confidence(z: torch.Tensor, layer: int, num_layers: int, alpha: float, raw: bool = True,
                     ids: torch.Tensor | None = None) -> LayerConfidence:
    """z: (k,) the exit head's logits over the tokens that may exit after layer ℓ, those tokens' ids (k,) in
    `ids` (None: z covers the whole vocabulary, −inf where a token may not exit). The raw (un-annealed)
    confidence is only for the trace's raw view: with raw=False it is not computed (NaN), sparing a softmax."""
    t = act_temperature(layer, num_layers, alpha)
    annealed = float(torch.softmax(z.float() / t, -1).max())
    raw_conf = float(torch.softmax(z.float(), -1).max()) if raw else math.nan
    top = int(z.argmax())
    return LayerConfidence(layer, t, raw_conf, annealed, top if ids is None else int(ids[top]))


def exits_at(conf: LayerConfidence, tau_exit: float) -> bool:
    return conf.annealed >= tau_exit


@dataclass(frozen=True)
class CheckCost:
    layer_ms: float  # one decoder layer over one token, in a full pass (as decoding runs it)
    check_ms: float  # one exit check after such a pass
    final_ms: float = 0.0  # the model's final norm and LM head over the whole vocabulary after such a pass

    @property
    def layers(self) -> float:
        """h: one exit check in decoder layers over one token (on a narrow model with a big vocabulary a check
        through the model's own LM head costs about as much as a layer, so δ must count it)."""
        return self.check_ms / self.layer_ms

    @property
    def final_layers(self) -> float:
        """λ: the final norm and LM head in layers: what every verification adds to the layers it runs, and what
        AR pays per token beside its L layers. On a narrow model with a big vocabulary it is far from nothing
        (SmolLM2, bf16 on a 2-core EPYC: 3.2 layers, a 49,152 × 576 head), so a model of SpecBound's cost that
        counts only layers misprices both sides."""
        return self.final_ms / self.layer_ms


@functools.lru_cache(maxsize=8)
@torch.inference_mode()
def check_cost(lm: CausalLM, heads: "ExitHeads | LayerHeads", v_exit: int = 0, reps: int = 15) -> CheckCost:
    """What one exit check over one token costs (over the V_exit most frequent tokens; 0: all the heads'), and
    the model's final head, against a decoder layer, timed where decoding meets them: after a pass through
    every layer, so neither finds its weights still in the CPU's cache (timed alone, over and over, a small
    matrix would look free). A plain pass, a pass and a check, and a pass and the final head alternate, and
    each cost is the median of its paired differences: a noisy machine drifts between two separate medians by
    more than a check costs."""
    vocab = exit_vocab(lm, v_exit)
    h = lm.embed(torch.tensor([1], device=lm.device))  # (1, d)
    cache = lm.new_cache(64)
    pos = torch.tensor([32], device=lm.device)
    mask = torch.ones(1, 33, dtype=torch.bool, device=lm.device)
    L, mid = lm.num_layers, max(1, lm.num_layers // 2)  # any layer below L costs the same
    lens = logit_lens(lm)

    def one_check(through=heads, ids=vocab) -> None:  # as drafting runs it: the scores and the confidence
        z, z_ids = through.scores(lm, mid, h, ids)
        layer_confidence(z[0], mid, L, 0.5, raw=False, ids=z_ids)

    def timed(then=None) -> float:
        t0 = time.perf_counter()
        lm.forward_layers(h, pos, cache, 32, mask, 0, L)
        if then is not None:
            then()
        sync(lm.device)
        return (time.perf_counter() - t0) * 1000

    def final() -> None:
        one_check(lens, None)

    for _ in range(2):  # first calls allocate (a head's row gather, the LM head's buffers): not what a check costs
        timed(one_check), timed(final)
    passes, diffs, finals = [], [], []
    for _ in range(reps):
        plain = timed()
        passes.append(plain)
        diffs.append(timed(one_check) - plain)
        finals.append(timed(final) - plain)
    t_alone = median_ms(one_check, reps)  # a floor where the difference is noise
    return CheckCost(statistics.median(passes) / L, max(t_alone, statistics.median(diffs)),
                     max(0.0, statistics.median(finals)))

