"""SpecBound's exit heads as the paper has them: one light LM head of its own per layer ℓ = 1..L−1, base frozen.

Head ℓ reads the hidden state after layer ℓ through its own RMSNorm and a linear map onto the V_h most
frequent tokens of its training text: z^(ℓ) = W_ℓ·norm_ℓ(h) + b_ℓ. Every other token gets −inf there (it
cannot exit early; the last layer is always the model's own head over the whole vocabulary). Rows are kept
in frequency order, so the V_exit most frequent tokens are the first V_exit rows: a check reads a
V_exit × d matrix, not the model's V × d head (on the embedded model 1024 × 256 against 8192 × 256: on a CPU
that streams weights from memory, a check costs in proportion to the rows it reads).

Why heads of their own rather than the shared head behind an adapter (core/model/exit_heads.py, kept as an
option): the adapters were distilled from the final layer's soft distribution, so their confidence reads
the target's own uncertainty about the text, well below the chance that the draft is the target's choice,
which is what an exit needs (docs/app.md, "Measurements behind the code"). These heads are trained with a
cross-entropy to the target's choice beside the distillation (cli/train_exit_heads.py --kind paper), which puts
their confidence on that scale.

Files beside the model (or under exit_heads/<model id>/ in the cache home): `layer_heads.safetensors`
(W, norm, bias and the token ids of the rows) and `layer_heads.json` (how they were trained, agreement).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from core.model.causal_lm import CausalLM
from core.model.linear_kernels import PLAIN, LinearPlan, planned

WEIGHTS = "layer_heads.safetensors"
META = "layer_heads.json"
PAPER = "paper"


def spread(z: torch.Tensor, ids: torch.Tensor | None, vocab_size: int) -> torch.Tensor:
    """(T, k) logits over token ids `ids` (k,) -> (T, V) with −inf for every other token (None: z is whole)."""
    if ids is None:
        return z
    out = torch.full((z.shape[0], vocab_size), -math.inf, device=z.device)  # (T, V)
    out[:, ids] = z
    return out


class WholeLogits:
    """z^(ℓ) over the whole vocabulary from a head kind's `scores` (what the page and the self drafter read)."""

    def logits(self, lm: CausalLM, layer: int, h: torch.Tensor, vocab: torch.Tensor | None = None) -> torch.Tensor:
        """(T, d) -> (T, V) fp32, −inf outside the rows `scores` reads."""
        return spread(*self.scores(lm, layer, h, vocab), lm.vocab_size)


class LayerHeads(WholeLogits, torch.nn.Module):
    """Light LM heads for layers ℓ = 1..L−1 (index ℓ−1), stacked: W (L−1, V_h, d), norm (L−1, d), bias (L−1, V_h);
    `ids` (V_h,) the target token id of each row, most frequent first."""

    def __init__(self, num_layers: int, hidden: int, ids: torch.Tensor, eps: float = 1e-6) -> None:
        super().__init__()
        n, v = num_layers - 1, len(ids)
        self.num_layers, self.eps = num_layers, eps
        self.weight = torch.nn.Parameter(torch.zeros(n, v, hidden))  # (L-1, V_h, d)
        self.norm = torch.nn.Parameter(torch.ones(n, hidden))  # (L-1, d)
        self.bias = torch.nn.Parameter(torch.zeros(n, v))  # (L-1, V_h)
        self.register_buffer("ids", ids.long().clone())  # (V_h,)
        self.kind = PAPER
        self.exit_layers: tuple[int, ...] | None = None  # the check set measured best for these heads (META)
        self.agreement: list[float] | None = None  # held-out top-1 agreement with the final layer, per ℓ (META)
        self.lens_agreement: list[float] | None = None  # the logit lens's, on the same text (META)

    @classmethod
    def logit_lens(cls, lm: CausalLM, ids: torch.Tensor) -> "LayerHeads":
        """Heads that start as the model's own final norm + LM head restricted to `ids` (training starts here)."""
        heads = cls(lm.num_layers, lm.config.hidden_size, ids)
        with torch.no_grad():
            head = lm.hf.lm_head
            heads.weight.copy_(head.weight.detach()[ids].float()[None].expand_as(heads.weight))
            heads.norm.copy_(lm.body.norm.weight.detach().float()[None].expand_as(heads.norm))
            if head.bias is not None:
                heads.bias.copy_(head.bias.detach()[ids].float()[None].expand_as(heads.bias))
        heads.eps = float(getattr(lm.body.norm, "variance_epsilon", heads.eps))
        return heads

    @property
    def vocab_size(self) -> int:
        return len(self.ids)

    def small_logits(self, layer: int, h: torch.Tensor, rows: int | None = None,
                     plan: LinearPlan = PLAIN) -> torch.Tensor:
        """(T, d) after layer ℓ -> (T, rows) fp32 logits over the `rows` most frequent tokens (None: all V_h),
        the product through `plan`'s kernel where it needs no copy of the rows: the target's, since a check
        reads its head between the target's layers, with the head's weights out of cache as in decoding (a
        check's one row: W·xᵀ; timed alone, with the head in cache, addmm looks faster: docs/app.md,
        "Measurements behind the code")."""
        i, k = layer - 1, rows or self.vocab_size
        x = h.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.norm[i]  # (T, d)
        return planned(x, self.weight[i, :k], self.bias[i, :k], plan)  # (T, k)

    def scores(self, lm: CausalLM, layer: int, h: torch.Tensor,
               vocab: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What a check reads: (T, k) fp32 logits over the k rows a token may exit to and their ids (k,), the
        first V_exit rows when `vocab` is given (core/model/exit_heads.exit_vocab: the same training text's most
        frequent ids, so its first rows are those ids). At ℓ = L the model's own head, whole, and None for ids.
        A check needs only these: every other token is −inf, so its softmax and argmax are the same over k."""
        if layer >= self.num_layers:
            return lm.head(h), None
        k = self.vocab_size if vocab is None else min(len(vocab), self.vocab_size)
        return self.small_logits(layer, h, k, lm.plan), self.ids[:k]

    @property
    def megabytes(self) -> float:
        return sum(p.numel() * p.element_size() for p in self.parameters()) / 1e6


def save_layer_heads(heads: LayerHeads, folder: Path, meta: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in heads.state_dict().items()}
    tensors = {k: v if k == "ids" else v.to(torch.float16) for k, v in tensors.items()}
    save_file(tensors, str(folder / WEIGHTS))
    meta = {"kind": PAPER, "num_layers": heads.num_layers, "vocab": heads.vocab_size, **meta}
    (folder / META).write_text(json.dumps(meta, indent=2) + "\n")


def read_layer_meta(folder: Path) -> dict:
    path = folder / META
    return json.loads(path.read_text()) if path.is_file() else {}


def load_layer_heads(lm: CausalLM, folder: Path) -> LayerHeads | None:
    """The per-layer heads stored in `folder` for this model, or None when there are none."""
    if not (folder / WEIGHTS).is_file():
        return None
    tensors = load_file(str(folder / WEIGHTS))
    n, v, d = tensors["weight"].shape
    if n != lm.num_layers - 1 or d != lm.config.hidden_size:
        raise ValueError(f"{folder / WEIGHTS} holds heads for {n + 1} layers of width {d}, "
                         f"but the model has {lm.num_layers} layers of width {lm.config.hidden_size}")
    heads = LayerHeads(lm.num_layers, d, tensors["ids"])
    heads.load_state_dict({k: v if k == "ids" else v.float() for k, v in tensors.items()})
    meta = read_layer_meta(folder)
    heads.eps = float(meta.get("eps", heads.eps))
    heads.exit_layers = tuple(int(x) for x in meta["exit_layers"]) if meta.get("exit_layers") else None
    agreement = meta.get("heldout", {}).get("head")
    heads.agreement = [float(a) for a in agreement] if agreement else None
    lens = meta.get("heldout", {}).get("lens")
    heads.lens_agreement = [float(a) for a in lens] if lens else None
    return heads.to(lm.device).eval().requires_grad_(False)
