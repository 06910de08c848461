"""A decoder layer read once into plain tensors, with its projections stacked: four products a layer, not seven.

Why: at batch size 1 a small model's forward is half products and half per-op cost (dispatch, module
attribute lookups, small elementwise ops). q/k/v read the same normed input and so do gate/up, so each group
is one product over stacked rows; each output row is the same dot product as before, so the logits are
bit-identical to the separate products over the same storage and kernel (`tests/test_fused_layer.py`, every
supported family). The HF modules' weights become views into the stacked tensors: no second copy, and a module
still runs as it did. Everything a forward reads (norm weights, eps, scaling, window) is read here once. Each
product computes through the model's plan of CPU kernels (core/model/linear_kernels.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.model.kv_cache import KVCache
from core.model.linear_kernels import PLAIN, LinearPlan, Product


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@dataclass
class FusedLayer:
    """One decoder layer as the forward runs it."""
    qkv: Product  # W (n_q + 2·n_kv, d): q_proj, k_proj, v_proj rows; b where the family has q/k/v biases (Qwen2)
    o: Product  # W (d, n_q)
    gate_up: Product  # W (2·I, d): gate_proj, up_proj rows
    down: Product  # W (d, I)
    norm_in: nn.Module  # the family's RMSNorm modules, for half precision (they cast between steps)
    norm_post: nn.Module
    eps: float
    act: Callable[[torch.Tensor], torch.Tensor]
    q_norm: nn.Module | None  # Qwen3's per-head norms before RoPE
    k_norm: nn.Module | None
    scaling: float
    window: int | None  # sliding-window width (Mistral, Qwen's sliding layers)
    heads: int
    kv_heads: int
    head_dim: int

    @property
    def n_q(self) -> int:
        return self.heads * self.head_dim

    @property
    def n_kv(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def inner(self) -> int:  # I
        return self.gate_up.w.shape[0] // 2

    def norm(self, module: nn.Module, h: torch.Tensor) -> torch.Tensor:
        """RMSNorm as one op in fp32 (the same values as the module's five there); the module otherwise."""
        if h.dtype == torch.float32:
            return F.rms_norm(h, module.weight.shape, module.weight, self.eps)
        return module(h)

    def heads_of(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The stacked q/k/v product over x (T, d), split per head: q and k (T, H + H_kv, D) with Qwen3's
        per-head norms applied, and v (T, H_kv, D)."""
        T = x.shape[0]
        out = self.qkv(x)  # (T, n_q + 2·n_kv)
        n_qk = self.n_q + self.n_kv
        qk = out[:, :n_qk].view(T, -1, self.head_dim)
        v = out[:, n_qk:].view(T, self.kv_heads, self.head_dim)
        if self.k_norm is not None:  # Qwen3 normalises q and k per head before RoPE
            qk = torch.cat([self.q_norm(qk[:, :self.heads]), self.k_norm(qk[:, self.heads:])], 1)
        return qk, v

    def windowed(self, mask: torch.Tensor, positions: torch.Tensor, start: int,
                 key_positions: torch.Tensor | None = None) -> torch.Tensor:
        """The sliding window on top of `mask`; by default slot s < start sits at position s and the new tokens
        follow (`key_positions`, (S,): every key slot's position otherwise)."""
        if not self.window:
            return mask
        if key_positions is None:
            key_positions = torch.cat([torch.arange(start, device=mask.device), positions])  # (S,)
        return mask & (positions[:, None] - key_positions[None, :] < self.window)

    def attention(self, i: int, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache, start: int,
                  mask: torch.Tensor, slots: torch.Tensor | None) -> torch.Tensor:
        """Self-attention of the normed x (T, d) as layer i: its K/V go to the cache first -> (T, d)."""
        qk, v = self.heads_of(x)
        qk = qk.transpose(0, 1)  # (H + H_kv, T, D): q and k rotated together
        qk = qk * cos + rotate_half(qk) * sin
        attended = self.attend(i, qk[:self.heads], qk[self.heads:], v.transpose(0, 1), cache, start, mask, slots)
        return self.o(attended)

    def attend(self, i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache, start: int,
               mask: torch.Tensor, slots: torch.Tensor | None) -> torch.Tensor:
        """q (H, T, D) over the cache once k, v (H_kv, T, D) are written to it -> (T, H·D), before o_proj: the
        part of a layer whose shapes follow the context (core/model/compiled_layer.py leaves it eager). Computed
        in the cache's dtype (CausalLM.cache_dtype), returned in q's."""
        dtype = q.dtype
        if k.dtype != cache.k.dtype:
            q, k, v = q.to(cache.k.dtype), k.to(cache.k.dtype), v.to(cache.k.dtype)
        if slots is None:
            cache.write(i, start, k, v)
        else:
            cache.write_at(i, slots, k, v)
        keys, values = cache.view(i, mask.shape[-1])  # (H_kv, S, D): the slots the mask covers
        out = F.scaled_dot_product_attention(
            q[None], keys[None], values[None], attn_mask=mask[None, None], scale=self.scaling,
            enable_gqa=self.heads != self.kv_heads,
        )  # (1, H, T, D)
        return out[0].transpose(0, 1).reshape(q.shape[1], self.n_q).to(dtype)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """down(act(gate(x)) · up(x)) with gate and up as one product: x (T, d) -> (T, d)."""
        gate, up = self.gate_up(x).split(self.inner, -1)  # each (T, I)
        return self.down(self.act(gate) * up)


def stack_rows(mods: list[nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Concatenate the modules' weights (and biases) and point each module at its rows of the result."""
    with torch.no_grad():
        w = torch.cat([m.weight for m in mods])  # (Σ out, in)
        biased = [m.bias is not None for m in mods]
        b = torch.cat([m.bias for m in mods]) if all(biased) else None
        row = 0
        for m in mods:
            n = m.weight.shape[0]
            m.weight = nn.Parameter(w[row:row + n], requires_grad=m.weight.requires_grad)
            if b is not None:
                m.bias = nn.Parameter(b[row:row + n], requires_grad=m.bias.requires_grad)
            row += n
        if any(biased) and b is None:  # some carry a bias and some not: zeros for the others' rows
            b = torch.cat([m.bias if m.bias is not None else m.weight.new_zeros(m.weight.shape[0]) for m in mods])
    return w, b


def _window(attn: nn.Module, config) -> int | None:
    if hasattr(attn, "sliding_window"):
        return attn.sliding_window or None
    if config.model_type == "mistral":  # Mistral keeps it on the config only
        return getattr(config, "sliding_window", None) or None
    return None


def fuse(layer: nn.Module, config, plan: LinearPlan = PLAIN) -> FusedLayer:
    """The layer's four products (weights row-major, as loaded; each through `plan`'s kernels)."""
    attn, mlp = layer.self_attn, layer.mlp
    qkv = Product(*stack_rows([attn.q_proj, attn.k_proj, attn.v_proj]), plan)
    gate_up = Product(*stack_rows([mlp.gate_proj, mlp.up_proj]), plan)
    o = Product(attn.o_proj.weight, attn.o_proj.bias, plan)
    down = Product(mlp.down_proj.weight, mlp.down_proj.bias, plan)
    act = F.silu if getattr(config, "hidden_act", None) == "silu" else mlp.act_fn
    return FusedLayer(
        qkv, o, gate_up, down, layer.input_layernorm, layer.post_attention_layernorm,
        layer.input_layernorm.variance_epsilon, act, getattr(attn, "q_norm", None), getattr(attn, "k_norm", None),
        attn.scaling, _window(attn, config), config.num_attention_heads, config.num_key_value_heads, attn.head_dim)


def stale(layer: nn.Module, fused: FusedLayer) -> bool:
    """Whether the layer's weights moved to other storage (replaced, or .to() another device or dtype) since it
    was read, not edited in place: then it is read again."""
    return (layer.self_attn.q_proj.weight.data_ptr() != fused.qkv.w.data_ptr()
            or layer.mlp.down_proj.weight.data_ptr() != fused.down.w.data_ptr())


def products(layers: list[FusedLayer]) -> list[Product]:
    """Every product of the layers in the order a forward runs them."""
    return [p for f in layers for p in (f.qkv, f.o, f.gate_up, f.down)]
