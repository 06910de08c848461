"""An EAGLE-3 draft head: a decoder layer (or a few) that drafts from the target's own hidden states.

Module names follow the heads SafeAILab/EAGLE publishes, so theirs load here and ours load there: `fc`
fuses the target's hidden states at three taps (by default the ones entering layers 2, L//2 and L-3;
low, mid, high; 3H -> H); `midlayer` is the EAGLE layer whose q/k/v read 2H = [input_layernorm(embedding),
hidden_norm(state)] with the residual taken from the state; `norm` + `lm_head` score a reduced draft
vocabulary, mapped back by `d2t` (target id = draft id + d2t[draft id]); `t2d` marks target ids that have
a draft id. Both buffers are absent when the two vocabularies are equal. The token embedding is the
target's own (frozen) and is not stored with the head, unless the head is narrower than its target or
was trained with an embedding of its own (`own_embedding`). Other publishers' layouts are mapped onto
these names by core/eagle3/dialects.py; the variants they carry (more layers, biases, Qwen3 q/k norms,
norms before fc, rope scaling, the MLP's activation) are fields of EagleConfig, off by default.

Entry t of the head pairs the target's fused state f_t with the next token x_{t+1} at position t, and
its output state s_t predicts x_{t+2}. Drafting deeper, a node feeds its parent's s back in place of
f: the "training-time test" in cli/train_eagle3.py unrolls exactly that.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import torch
import torch.nn as nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from core.eagle3.head_info import HeadInfo
from core.eagle3.layers import ATTN, MLP_LINEARS, DecoderLayer, MidLayer, RMSNorm


@dataclass
class EagleConfig:
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int  # the target's
    draft_vocab_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    head_dim: int | None = None
    target_hidden_size: int | None = None  # when the target is wider than the head
    # which target hidden states fc fuses (0 = embeddings, i = input of layer i), under the name vLLM and
    # speculators give it; None = the published default (2, L//2, L-3)
    eagle_aux_hidden_state_layer_ids: list[int] | None = None
    num_hidden_layers: int = 1  # the EAGLE layer, then plain decoder layers
    hidden_act: str = "silu"
    rope_scaling: dict | None = None  # transformers' rope parameters beyond rope_theta ({"rope_type": ..., ...})
    norm_before_residual: bool = False  # the EAGLE layer's residual is hidden_norm(state)
    norm_before_fc: bool = False  # one RMSNorm over the 3 fused states (3H) before fc
    fc_norm: bool = False  # one RMSNorm per fused state before fc
    qk_norm: bool = False  # Qwen3-type layers: per-head RMSNorm on q and k
    biases: tuple[str, ...] = ()  # linears with a bias: "fc" and per-layer q_proj, ..., down_proj
    own_embedding: bool = False  # the head embeds tokens itself (embed_tokens)

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def width(self) -> int:
        """The target's hidden size, which fc reads."""
        return self.target_hidden_size or self.hidden_size

    @property
    def feature_size(self) -> int:
        return 3 * self.width

    def to_dict(self) -> dict:
        """The published config.json fields (a Llama config with draft_vocab_size); variants under the names
        their publishers give them, written only when set."""
        keys = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size",
                "draft_vocab_size", "rms_norm_eps", "rope_theta", "max_position_embeddings", "head_dim",
                "target_hidden_size", "eagle_aux_hidden_state_layer_ids")
        d = {k: getattr(self, k) for k in keys if getattr(self, k) is not None}
        flags = {k: True for k in ("norm_before_residual", "norm_before_fc", "fc_norm") if getattr(self, k)}
        if set(ATTN) <= set(self.biases):
            flags["attention_bias"] = True
        if set(MLP_LINEARS) <= set(self.biases):
            flags["mlp_bias"] = True
        if self.rope_scaling:
            flags["rope_scaling"] = self.rope_scaling
        return {"architectures": ["LlamaForCausalLM"], "model_type": "qwen3" if self.qk_norm else "llama",
                "num_hidden_layers": self.num_hidden_layers, "hidden_act": self.hidden_act,
                "tie_word_embeddings": False, **d, **flags}


def feature_layers(num_layers: int, ids: list[int] | None = None) -> tuple[int, int, int]:
    """Indices into the target's hidden states (0 = embeddings, i = input of layer i, L = the last layer's
    output before the final norm) that fc fuses: `ids` when the head's config names them, else the
    published default, the inputs of layers 2, L//2 and L-3."""
    if ids is None:
        return 2, num_layers // 2, num_layers - 3
    if len(ids) != 3 or not all(0 <= int(i) <= num_layers for i in ids):
        raise ValueError(f"eagle_aux_hidden_state_layer_ids must be three indices in 0..{num_layers}, got {list(ids)}")
    return tuple(int(i) for i in ids)


def rotary(c: EagleConfig) -> LlamaRotaryEmbedding:
    """transformers' own rotary embedding for the head's geometry, so every rope_scaling type it knows
    (linear, dynamic, yarn, longrope, llama3) is computed by its own functions."""
    params = {"rope_type": "default", **(c.rope_scaling or {}), "rope_theta": c.rope_theta}
    cfg = LlamaConfig(hidden_size=c.hidden_size, num_attention_heads=c.num_attention_heads, head_dim=c.hd,
                      max_position_embeddings=c.max_position_embeddings, rope_parameters=params)
    return LlamaRotaryEmbedding(cfg)


KV = Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class EagleHead(nn.Module):
    def __init__(self, c: EagleConfig, info: HeadInfo | None = None) -> None:
        super().__init__()
        self.config, self.info = c, info
        if c.norm_before_fc:
            self.input_norm = RMSNorm(c.feature_size, c.rms_norm_eps)
        if c.fc_norm:
            self.fc_norm = nn.ModuleList(RMSNorm(c.width, c.rms_norm_eps) for _ in range(3))
        self.fc = nn.Linear(c.feature_size, c.hidden_size, bias="fc" in c.biases)
        self.midlayer = MidLayer(c)
        self.extra_layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_hidden_layers - 1))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.draft_vocab_size, bias=False)
        if c.own_embedding:
            self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        if c.draft_vocab_size != c.vocab_size:
            self.register_buffer("d2t", torch.zeros(c.draft_vocab_size, dtype=torch.long))
            self.register_buffer("t2d", torch.zeros(c.vocab_size, dtype=torch.bool))
        self.rotary = rotary(c)

    @property
    def reduced(self) -> bool:
        return self.config.draft_vocab_size != self.config.vocab_size

    def fuse(self, feats: torch.Tensor) -> torch.Tensor:
        """The target's tapped states (…, 3H_t) -> fc's fused state (…, H), through the norms some heads put
        before fc (speculators' `norm_before_fc` over all 3H_t, `fc_norm` per tapped state)."""
        if hasattr(self, "input_norm"):
            feats = self.input_norm(feats)
        if hasattr(self, "fc_norm"):
            feats = torch.cat([norm(f) for norm, f in zip(self.fc_norm, feats.chunk(3, -1))], -1)
        return self.fc(feats)

    def rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions (B, T) -> cos, sin (B, 1, T, D): broadcast over heads. A rope whose frequencies depend on
        the length (dynamic, longrope) goes through transformers' forward; the others use its frequencies and
        scale directly, the same arithmetic without its per-call wrappers (a draft level calls this)."""
        r = self.rotary
        if r.rope_type in ("dynamic", "longrope"):
            cos, sin = r(torch.empty(0, dtype=dtype, device=positions.device), positions)  # (B, T, D)
            return cos[:, None], sin[:, None]
        freqs = positions[..., None].float() * r.inv_freq.float()  # (B, T, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]  # (B, 1, T, D)
        return (emb.cos() * r.attention_scaling).to(dtype), (emb.sin() * r.attention_scaling).to(dtype)

    def qkv(self, emb: torch.Tensor, state: torch.Tensor, positions: torch.Tensor):
        """The EAGLE layer's projections. emb, state: (B, T, H); positions (B, T).
        Returns q (B, nh, T, D), k, v (B, nkv, T, D)."""
        cos, sin = self.rope(positions, emb.dtype)
        return self.midlayer.self_attn.project(self.midlayer.attn_input(emb, state), cos, sin)

    def attend(self, state: torch.Tensor, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               mask: torch.Tensor) -> torch.Tensor:
        """The rest of the EAGLE layer: attention over keys/values (B, nkv, S, D) under mask (T, S), residual
        from `state` (B, T, H), then the MLP. Returns its output state (B, T, H)."""
        return self.midlayer.finish(state, self.midlayer.self_attn.attend(q, keys, values, mask))

    def forward(self, emb: torch.Tensor, state: torch.Tensor, positions: torch.Tensor, kv: KV,
                mask: torch.Tensor) -> torch.Tensor:
        """Every layer over T entries. emb, state (B, T, H); positions (B, T); `kv(i, k, v)` stores layer i's
        new keys/values (B, nkv, T, D) and returns all it attends to (B, nkv, S, D); mask (T, S).
        Returns the head's output state (B, T, H)."""
        cos, sin = self.rope(positions, emb.dtype)
        attn = self.midlayer.self_attn
        q, k, v = attn.project(self.midlayer.attn_input(emb, state), cos, sin)
        h = self.midlayer.finish(state, attn.attend(q, *kv(0, k, v), mask))
        for i, layer in enumerate(self.extra_layers, start=1):
            q, k, v = layer.self_attn.project(layer.input_layernorm(h), cos, sin)
            h = layer.finish(h, layer.self_attn.attend(q, *kv(i, k, v), mask))
        return h

    def logits(self, state: torch.Tensor) -> torch.Tensor:
        """(…, H) -> (…, draft_vocab) logits over the draft vocabulary."""
        return self.lm_head(self.norm(state))

    def draft_ids(self) -> torch.Tensor:
        """(draft_vocab,) target id of each draft id."""
        ids = torch.arange(self.config.draft_vocab_size, device=self.lm_head.weight.device)
        return ids + self.d2t if self.reduced else ids

    @cached_property
    def draft_vocab(self) -> frozenset[int]:
        """The target ids the head can propose (for the compatibility readout's coverage)."""
        return frozenset(self.draft_ids().tolist())
