"""A draft head's LM head as int8: weights quantized per row once, inputs quantized per call (dynamic int8).

Why: on a CPU the largest product of a draft forward is the head's LM head over the draft vocabulary (SmolLM2's
head: 14,336 × 576, 62% of its weights), and the target's forward between two drafts pushes it out of the cache,
so each draft level streams it from memory again. One quarter (fp32) or one half (bf16) of the bytes, through
PyTorch's quantized x86 kernel, measured 0.7–1.0 ms against 1.3–1.5 ms for the fastest bf16 kernel at 1–4 rows on
the 2-core EPYC (docs/bench/real_model.md, "The draft's LM head in int8").

It changes only the drafter's scores z, hence q and the tree's shape, never the verification: every method
stays exactly the target's output (greedy) or distribution (sampling, where q is the same int8 q the tokens were
drawn from). `head_int8` (core/knobs.py) turns it on or off; `auto` uses it on a CPU for LM heads of at least
`AUTO_MIN_WEIGHTS` weights (the real models' heads), and leaves the embedded head as its tables and its
comparisons with SafeAILab/EAGLE's code were measured.
"""
from __future__ import annotations

import warnings
import weakref

import torch

from core.model.linear_kernels import weight_version

CHOICES = ("auto", "on", "off")
AUTO_MIN_WEIGHTS = 4 * 2 ** 20  # V_d · H: SmolLM2's head has 8.3 M, the embedded head 1.0 M
_CACHE: "weakref.WeakKeyDictionary[torch.nn.Linear, tuple[tuple[int, int], Int8Scores]]" = weakref.WeakKeyDictionary()


def available() -> bool:
    """The quantized CPU kernels this build carries (x86/fbgemm; an ARM build offers qnnpack, not timed here)."""
    engines = torch.backends.quantized.supported_engines
    return (any(e in engines for e in ("x86", "fbgemm")) and torch.backends.quantized.engine in ("x86", "fbgemm")
            and hasattr(torch.ops.quantized, "linear_dynamic"))


def use_int8(choice: str, lm_head: torch.nn.Linear) -> bool:
    """Whether a drafter scores through int8 under `choice`. Raises ValueError for a choice not in CHOICES, or
    'on' where it cannot run (a GPU, a build without the kernels)."""
    if choice not in CHOICES:
        raise ValueError(f"head_int8 must be one of {', '.join(CHOICES)} (got {choice!r})")
    runs = lm_head.weight.device.type == "cpu" and available()
    if choice == "on" and not runs:
        raise ValueError("head_int8=on needs a CPU build of PyTorch with its x86 quantized kernels")
    return runs and (choice == "on" or (choice == "auto" and lm_head.weight.numel() >= AUTO_MIN_WEIGHTS))


class Int8Scores:
    """x (F, H) -> (F, V_d) fp32 scores through W quantized per output row to int8 (symmetric)."""

    def __init__(self, weight: torch.Tensor) -> None:
        w = weight.detach().float().cpu()  # (V_d, H)
        scale = (w.abs().amax(1).clamp_min(1e-12) / 127).double()  # (V_d,)
        with warnings.catch_warnings():  # quantized tensors are marked for removal after the torch pinned here;
            warnings.simplefilter("ignore", UserWarning)  # available() turns `auto` off on a build without them
            q = torch.quantize_per_channel(w, scale, torch.zeros_like(scale, dtype=torch.long), 0, torch.qint8)
        self.packed = torch.ops.quantized.linear_prepack(q, None)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        # reduce_range: inputs in 7 bits, so CPUs without VNNI do not saturate their 16-bit pair sums
        return torch.ops.quantized.linear_dynamic(x.float().contiguous(), self.packed, True)


def int8_scores(lm_head: torch.nn.Linear) -> Int8Scores:
    """The int8 copy of this LM head, made once and shared by every drafter on the head (remade if the weight
    changes, as when it trains)."""
    version = weight_version(lm_head.weight)
    held = _CACHE.get(lm_head)
    if held is None or held[0] != version:
        held = (version, Int8Scores(lm_head.weight))
        _CACHE[lm_head] = held
    return held[1]
