"""An EAGLE-3 draft head: one decoder layer that drafts from the target's own hidden states.

Layout and tensor names follow the heads SafeAILab/EAGLE publishes, so theirs load here and ours load
there: `fc` fuses the target's hidden states entering layers 2, L//2 and L-3 (low, mid, high; 3H -> H);
`midlayer` is one Llama decoder layer whose q/k/v read 2H = [input_layernorm(embedding),
hidden_norm(state)] with the residual taken from the state; `norm` + `lm_head` score a reduced draft
vocabulary, mapped back by `d2t` (target id = draft id + d2t[draft id]); `t2d` marks target ids that
have a draft id. Both buffers are absent when the two vocabularies are equal. The token embedding is
the target's own (frozen) and is not stored with the head. A config may name other depths for fc in
`eagle_aux_hidden_state_layer_ids` (the field vLLM and speculators read).

Entry t of the head pairs the target's fused state f_t with the next token x_{t+1} at position t, and
its output state s_t predicts x_{t+2}. Drafting deeper, a node feeds its parent's s back in place of
f: the "training-time test" in cli/train_eagle3.py unrolls exactly that.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


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

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def feature_size(self) -> int:
        return 3 * (self.target_hidden_size or self.hidden_size)

    @classmethod
    def from_dict(cls, d: dict) -> "EagleConfig":
        names = cls.__dataclass_fields__
        d = {**d.get("eagle_config", {}), **d}  # some releases nest the EAGLE fields there
        cfg = cls(**{k: d[k] for k in names if k in d and d[k] is not None})
        if "draft_vocab_size" not in d:
            cfg.draft_vocab_size = cfg.vocab_size
        return cfg

    def to_dict(self) -> dict:
        """The published config.json fields (a Llama config with one layer and draft_vocab_size)."""
        d = {k: v for k, v in asdict(self).items() if v is not None}
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
                "hidden_act": "silu", "tie_word_embeddings": False, **d}


def feature_layers(num_layers: int, ids: list[int] | None = None) -> tuple[int, int, int]:
    """Indices into the target's hidden states (0 = embeddings, i = input of layer i, L = the last layer's
    output before the final norm) that fc fuses: `ids` when the head's config names them, else the
    published default, the inputs of layers 2, L//2 and L-3."""
    if ids is None:
        return 2, num_layers // 2, num_layers - 3
    if len(ids) != 3 or not all(0 <= int(i) <= num_layers for i in ids):
        raise ValueError(f"eagle_aux_hidden_state_layer_ids must be three indices in 0..{num_layers}, got {list(ids)}")
    return tuple(int(i) for i in ids)


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class Attention(nn.Module):
    def __init__(self, c: EagleConfig) -> None:
        super().__init__()
        self.q_proj = nn.Linear(2 * c.hidden_size, c.num_attention_heads * c.hd, bias=False)
        self.k_proj = nn.Linear(2 * c.hidden_size, c.num_key_value_heads * c.hd, bias=False)
        self.v_proj = nn.Linear(2 * c.hidden_size, c.num_key_value_heads * c.hd, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.hd, c.hidden_size, bias=False)


class MLP(nn.Module):
    def __init__(self, c: EagleConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MidLayer(nn.Module):
    def __init__(self, c: EagleConfig) -> None:
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class EagleHead(nn.Module):
    def __init__(self, c: EagleConfig) -> None:
        super().__init__()
        self.config = c
        self.fc = nn.Linear(c.feature_size, c.hidden_size, bias=False)
        self.midlayer = MidLayer(c)
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.draft_vocab_size, bias=False)
        if c.draft_vocab_size != c.vocab_size:
            self.register_buffer("d2t", torch.zeros(c.draft_vocab_size, dtype=torch.long))
            self.register_buffer("t2d", torch.zeros(c.vocab_size, dtype=torch.bool))
        inv_freq = 1.0 / c.rope_theta ** (torch.arange(0, c.hd, 2, dtype=torch.float32) / c.hd)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @property
    def reduced(self) -> bool:
        return self.config.draft_vocab_size != self.config.vocab_size

    def rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions (..., T) -> cos, sin (..., 1, T, D): broadcast over heads."""
        freqs = positions[..., None].float() * self.inv_freq  # (..., T, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)[..., None, :, :]
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def qkv(self, emb: torch.Tensor, state: torch.Tensor, positions: torch.Tensor):
        """emb, state: (B, T, H); positions (B, T). Returns q (B, nh, T, D), k, v (B, nkv, T, D)."""
        c, attn = self.config, self.midlayer.self_attn
        x = torch.cat((self.midlayer.input_layernorm(emb), self.midlayer.hidden_norm(state)), -1)  # (B, T, 2H)
        B, T, _ = x.shape
        q = attn.q_proj(x).view(B, T, c.num_attention_heads, c.hd).transpose(1, 2)
        k = attn.k_proj(x).view(B, T, c.num_key_value_heads, c.hd).transpose(1, 2)
        v = attn.v_proj(x).view(B, T, c.num_key_value_heads, c.hd).transpose(1, 2)
        cos, sin = self.rope(positions, q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def attend(self, state: torch.Tensor, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               mask: torch.Tensor) -> torch.Tensor:
        """The rest of the layer: attention over keys/values (B, nkv, S, D) under mask (T, S), residual
        from `state` (B, T, H), then the MLP. Returns the head's output state (B, T, H)."""
        c = self.config
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask,
                                             enable_gqa=c.num_attention_heads != c.num_key_value_heads)
        B, _, T, _ = out.shape
        h = state + self.midlayer.self_attn.o_proj(out.transpose(1, 2).reshape(B, T, -1))
        return h + self.midlayer.mlp(self.midlayer.post_attention_layernorm(h))

    def logits(self, state: torch.Tensor) -> torch.Tensor:
        """(…, H) -> (…, draft_vocab) logits over the draft vocabulary."""
        return self.lm_head(self.norm(state))

    def draft_ids(self) -> torch.Tensor:
        """(draft_vocab,) target id of each draft id."""
        ids = torch.arange(self.config.draft_vocab_size, device=self.lm_head.weight.device)
        return ids + self.d2t if self.reduced else ids
