"""The pieces an EAGLE-3 head is built from: RMSNorm, attention projections, the MLP, the EAGLE layer
(layer 0, which reads [embedding, state]) and the plain decoder layers some heads stack after it.

Every variant a published head may carry is a constructor argument here, never a subclass: per-linear
biases (Llama's `attention_bias` / `mlp_bias`, SGLang's `bias` on fc), Qwen3's per-head `q_norm` /
`k_norm` applied before RoPE, the MLP's activation (`hidden_act`, looked up in transformers' ACT2FN) and
`norm_before_residual` (speculators / vLLM: the residual is taken from the normed state). With none of
them the modules run exactly the operations of the original single-layer head.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.activations import ACT2FN

from core.model.fused_layer import rotate_half

ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_LINEARS = ("gate_proj", "up_proj", "down_proj")


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class Attention(nn.Module):
    """q/k/v read `in_size` features (2H in the EAGLE layer, H after it); o_proj writes H."""

    def __init__(self, in_size: int, hidden: int, heads: int, kv_heads: int, hd: int, biases: tuple[str, ...],
                 qk_norm: bool, eps: float) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, hd
        self.q_proj = nn.Linear(in_size, heads * hd, bias="q_proj" in biases)
        self.k_proj = nn.Linear(in_size, kv_heads * hd, bias="k_proj" in biases)
        self.v_proj = nn.Linear(in_size, kv_heads * hd, bias="v_proj" in biases)
        self.o_proj = nn.Linear(heads * hd, hidden, bias="o_proj" in biases)
        if qk_norm:  # Qwen3: RMSNorm over each head's D features, before RoPE
            self.q_norm = RMSNorm(hd, eps)
            self.k_norm = RMSNorm(hd, eps)

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x (B, T, in) -> q (B, nh, T, D), k, v (B, nkv, T, D), q and k rotated by cos, sin (B, 1, T, D)."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.hd)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.hd)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """q (B, nh, T, D) over keys/values (B, nkv, S, D) under mask (T, S) -> (B, T, H) after o_proj. Computed
        in the keys' dtype (a drafter's cache may be wider than the head: fp32 for bf16 on a CPU)."""
        out = F.scaled_dot_product_attention(q.to(keys.dtype), keys, values, attn_mask=mask,
                                             enable_gqa=self.heads != self.kv_heads)
        B, _, T, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1).to(q.dtype))


class MLP(nn.Module):
    def __init__(self, hidden: int, inner: int, act: str, biases: tuple[str, ...]) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias="gate_proj" in biases)
        self.up_proj = nn.Linear(hidden, inner, bias="up_proj" in biases)
        self.down_proj = nn.Linear(inner, hidden, bias="down_proj" in biases)
        self.act = ACT2FN[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


def layer_args(c) -> dict:
    """The geometry every layer of a head shares, read off its EagleConfig."""
    return dict(hidden=c.hidden_size, heads=c.num_attention_heads, kv_heads=c.num_key_value_heads, hd=c.hd,
                biases=tuple(c.biases), qk_norm=c.qk_norm, eps=c.rms_norm_eps)


class MidLayer(nn.Module):
    """The EAGLE layer: q/k/v read [input_layernorm(embedding), hidden_norm(state)] (2H); the residual is the
    state, or its normed copy with `norm_before_residual`."""

    def __init__(self, c) -> None:
        super().__init__()
        self.self_attn = Attention(2 * c.hidden_size, **layer_args(c))
        self.mlp = MLP(c.hidden_size, c.intermediate_size, c.hidden_act, tuple(c.biases))
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.norm_before_residual = c.norm_before_residual

    def attn_input(self, emb: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """emb, state (B, T, H) -> (B, T, 2H)."""
        return torch.cat((self.input_layernorm(emb), self.hidden_norm(state)), -1)

    def finish(self, state: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Residual around attention (B, T, H), then the MLP block."""
        h = (self.hidden_norm(state) if self.norm_before_residual else state) + attn
        return h + self.mlp(self.post_attention_layernorm(h))


class DecoderLayer(nn.Module):
    """A plain pre-norm decoder layer over H features (the layers after the EAGLE layer, as speculators and
    vLLM stack them: input_layernorm, attention, residual, post_attention_layernorm, MLP, residual)."""

    def __init__(self, c) -> None:
        super().__init__()
        self.self_attn = Attention(c.hidden_size, **layer_args(c))
        self.mlp = MLP(c.hidden_size, c.intermediate_size, c.hidden_act, tuple(c.biases))
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def finish(self, h: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        h = h + attn
        return h + self.mlp(self.post_attention_layernorm(h))
