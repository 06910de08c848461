"""A plain reference forward of an EAGLE-3 head over a whole sequence, written from the publishers' code
(not from ours), on tensors under the publishers' names (`layers.{i}.*`, as speculators writes them):

- the EAGLE layer: SafeAILab/EAGLE eagle/model/cnets.py `LlamaDecoderLayeremb.forward` (residual = state;
  cat(input_layernorm(embedding), hidden_norm(state)) into attention; residual add; post-norm MLP), with
  speculators' `norm_before_residual` (models/eagle3/model_definitions.py: the residual becomes the normed
  state) and transformers' Qwen3Attention (q_norm / k_norm over each head before RoPE);
- layers after it: transformers' LlamaDecoderLayer, as speculators stacks them (models/eagle3/core.py);
- before fc: speculators core.py `input_norm` over all tapped states (`norm_before_fc`) or one norm per
  tapped state (`fc_norm`, also SpecForge's `project_hidden_states`);
- RoPE by hand: the original frequencies, SafeAILab's linear scaling (positions / factor) and SpecForge's
  llama3 frequency smoothing;
- attention the eager way EAGLE computes it: q·kᵀ/√D plus a causal mask, softmax in fp32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ACTS = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}


@dataclass
class Ref:
    """The settings the publishers' code reads, under their config names."""
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    hidden_act: str = "silu"
    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False


def rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def linear(x: torch.Tensor, w: dict, name: str) -> torch.Tensor:
    out = x @ w[name + ".weight"].T
    return out + w[name + ".bias"] if name + ".bias" in w else out


def inv_freq(r: Ref) -> torch.Tensor:
    inv = 1.0 / (r.rope_theta ** (torch.arange(0, r.head_dim, 2).float() / r.head_dim))
    s = r.rope_scaling or {}
    if s.get("rope_type") == "llama3":  # SpecForge's LlamaRotaryEmbedding with low/high frequency factors
        factor, low, high, orig = s["factor"], s["low_freq_factor"], s["high_freq_factor"], s["original_max_position_embeddings"]
        wave_len = 2 * math.pi / inv
        smooth = (orig / wave_len - low) / (high - low)
        inv = torch.where(wave_len < orig / high, inv, torch.where(wave_len > orig / low, inv / factor,
                                                                    (1 - smooth) * inv / factor + smooth * inv))
    return inv


def rope(positions: torch.Tensor, r: Ref) -> tuple[torch.Tensor, torch.Tensor]:
    t = positions.float()
    if (r.rope_scaling or {}).get("rope_type") == "linear":  # SafeAILab's LlamaLinearScalingRotaryEmbedding
        t = t / r.rope_scaling["factor"]
    freqs = torch.outer(t, inv_freq(r))
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, D)
    return emb.cos(), emb.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def attention(x: torch.Tensor, w: dict, p: str, r: Ref, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    T = x.shape[0]
    q = linear(x, w, p + ".q_proj").view(T, r.num_attention_heads, r.head_dim)
    k = linear(x, w, p + ".k_proj").view(T, r.num_key_value_heads, r.head_dim)
    v = linear(x, w, p + ".v_proj").view(T, r.num_key_value_heads, r.head_dim)
    if p + ".q_norm.weight" in w:  # Qwen3
        q, k = rms(q, w[p + ".q_norm.weight"], r.rms_norm_eps), rms(k, w[p + ".k_norm.weight"], r.rms_norm_eps)
    q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # (heads, T, D)
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    groups = r.num_attention_heads // r.num_key_value_heads
    k, v = k.repeat_interleave(groups, 0), v.repeat_interleave(groups, 0)
    scores = q @ k.transpose(1, 2) / math.sqrt(r.head_dim)
    scores = scores + torch.full((T, T), float("-inf")).triu(1)
    out = torch.softmax(scores.float(), -1).to(q.dtype) @ v  # (heads, T, D)
    return linear(out.transpose(0, 1).reshape(T, -1), w, p + ".o_proj")


def mlp(x: torch.Tensor, w: dict, p: str, r: Ref) -> torch.Tensor:
    return linear(ACTS[r.hidden_act](linear(x, w, p + ".gate_proj")) * linear(x, w, p + ".up_proj"), w, p + ".down_proj")


def fuse(feats: torch.Tensor, w: dict, r: Ref) -> torch.Tensor:
    if r.norm_before_fc:
        feats = rms(feats, w["input_norm.weight"], r.rms_norm_eps)
    if r.fc_norm:
        feats = torch.cat([rms(f, w[f"fc_norm.{i}.weight"], r.rms_norm_eps) for i, f in enumerate(feats.chunk(3, -1))], -1)
    return linear(feats, w, "fc")


def eagle_layer(emb: torch.Tensor, state: torch.Tensor, w: dict, r: Ref, cos, sin) -> torch.Tensor:
    p = "layers.0"
    residual = state
    state_n = rms(state, w[p + ".hidden_norm.weight"], r.rms_norm_eps)
    if r.norm_before_residual:
        residual = state_n
    x = torch.cat((rms(emb, w[p + ".input_layernorm.weight"], r.rms_norm_eps), state_n), -1)
    h = residual + attention(x, w, p + ".self_attn", r, cos, sin)
    return h + mlp(rms(h, w[p + ".post_attention_layernorm.weight"], r.rms_norm_eps), w, p + ".mlp", r)


def decoder_layer(h: torch.Tensor, i: int, w: dict, r: Ref, cos, sin) -> torch.Tensor:
    p = f"layers.{i}"
    h = h + attention(rms(h, w[p + ".input_layernorm.weight"], r.rms_norm_eps), w, p + ".self_attn", r, cos, sin)
    return h + mlp(rms(h, w[p + ".post_attention_layernorm.weight"], r.rms_norm_eps), w, p + ".mlp", r)


def reference_logits(w: dict, r: Ref, feats: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
    """feats (T, 3H_t) the target's tapped states, emb (T, H) the next tokens' embeddings, positions 0..T-1
    -> (T, draft vocab) logits; the head's layers are counted off the tensors present."""
    layers = len({k.split(".")[1] for k in w if k.startswith("layers.")})
    cos, sin = rope(torch.arange(feats.shape[0]), r)
    h = eagle_layer(emb, fuse(feats, w, r), w, r, cos, sin)
    for i in range(1, layers):
        h = decoder_layer(h, i, w, r, cos, sin)
    return linear(rms(h, w["norm.weight"], r.rms_norm_eps), w, "lm_head")
