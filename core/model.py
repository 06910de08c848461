"""Our own forward pass over a Hugging Face causal LM's weights.

Hugging Face loads the config, the safetensors weights and the tokenizer; we run the layers
ourselves so that we control the cache (slot-indexed, see kv_cache.py), the attention mask
(tree attention) and the positions, and can stop after any layer (early exit). Norms, MLPs
and the rotary embedding are the HF modules themselves, so every family detail they carry
(rope scaling, biases, Qwen3's q/k norms) is used as is.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from core.kv_cache import KVCache

SUPPORTED_FAMILIES = ("llama", "qwen2", "qwen3", "mistral")


@dataclass
class ForwardOut:
    logits: torch.Tensor  # (T, V), fp32
    hidden: list[torch.Tensor] | None  # L + 1 entries of (T, d): embeddings, then after each layer
    taps: torch.Tensor | None = None  # (T, len(taps)·d): the requested hidden states side by side


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def causal_mask(prefix_len: int, n_new: int, device: torch.device) -> torch.Tensor:
    """(T, prefix + T) bool, True = may attend: every prefix slot, and earlier-or-same new tokens."""
    new = torch.ones(n_new, n_new, dtype=torch.bool, device=device).tril()
    prefix = torch.ones(n_new, prefix_len, dtype=torch.bool, device=device)
    return torch.cat([prefix, new], dim=1)


class CausalLM:
    """A loaded causal LM (batch size 1) with a forward over explicit positions, mask and cache slots."""

    def __init__(self, hf_model: torch.nn.Module, tokenizer, name: str) -> None:
        self.hf = hf_model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.config = hf_model.config
        if self.config.model_type not in SUPPORTED_FAMILIES:
            raise ValueError(f"model family '{self.config.model_type}' is not supported (use one of {', '.join(SUPPORTED_FAMILIES)})")
        self.body = hf_model.model
        self.layers = list(self.body.layers)
        attn = self.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.n_heads = self.config.num_attention_heads
        self.n_kv_heads = self.config.num_key_value_heads
        self.device = next(hf_model.parameters()).device
        self.dtype = next(hf_model.parameters()).dtype
        self._texts: dict[int, str] = {}  # token id -> its text: traces name every node, so decode each id once

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def vocab_size(self) -> int:
        return self.hf.lm_head.out_features

    @property
    def max_context(self) -> int:
        return int(getattr(self.config, "max_position_embeddings", 2048))

    @property
    def eos_ids(self) -> set[int]:
        eos = self.config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def token_text(self, token_id: int) -> str:
        """One token's text as the tokenizer decodes it alone (cached: a step's trace names dozens of tokens)."""
        text = self._texts.get(token_id)
        if text is None:
            text = self._texts[token_id] = self.tokenizer.decode([token_id])
        return text

    def new_cache(self, max_len: int | None = None) -> KVCache:
        return KVCache(self.num_layers, self.n_kv_heads, self.head_dim, max_len or self.max_context,
                       self.dtype, self.device)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.body.embed_tokens(tokens)  # (T,) -> (T, d)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Final norm + LM head: (T, d) -> (T, V) fp32 logits."""
        return self.hf.lm_head(self.body.norm(h)).float()

    def rope(self, positions: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.body.rotary_emb(like[None], positions[None])  # each (1, T, D)
        return cos[0], sin[0]  # (T, D)

    def project_kv(self, i: int, x: torch.Tensor, cos: torch.Tensor,
                   sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer i's keys (rotated) and values for its normed input x (T, d): each (H_kv, T, D).
        Public because SpecBound also writes K/V for tokens that exited below layer i."""
        attn = self.layers[i].self_attn
        T = x.shape[0]
        k = attn.k_proj(x).view(T, self.n_kv_heads, self.head_dim)  # (T, H_kv, D)
        v = attn.v_proj(x).view(T, self.n_kv_heads, self.head_dim)
        if hasattr(attn, "k_norm"):
            k = attn.k_norm(k)
        k, v = k.transpose(0, 1), v.transpose(0, 1)  # (H_kv, T, D)
        return k * cos + rotate_half(k) * sin, v

    def _attention(self, i: int, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache,
                   start: int, mask: torch.Tensor, slots: torch.Tensor | None = None) -> torch.Tensor:
        attn = self.layers[i].self_attn
        T = x.shape[0]
        q = attn.q_proj(x).view(T, self.n_heads, self.head_dim)  # (T, H, D)
        if hasattr(attn, "q_norm"):  # Qwen3 normalises q and k per head before RoPE
            q = attn.q_norm(q)
        q = q.transpose(0, 1)  # (H, T, D)
        q = q * cos + rotate_half(q) * sin
        k, v = self.project_kv(i, x, cos, sin)
        if slots is None:
            cache.write(i, start, k, v)
        else:
            cache.write_at(i, slots, k, v)
        keys, values = cache.view(i, mask.shape[-1])  # (H_kv, S, D): the slots the mask covers
        out = F.scaled_dot_product_attention(
            q[None], keys[None], values[None], attn_mask=mask[None, None], scale=attn.scaling,
            enable_gqa=self.n_heads != self.n_kv_heads,
        )  # (1, H, T, D)
        return attn.o_proj(out[0].transpose(0, 1).reshape(T, self.n_heads * self.head_dim))

    def _windowed(self, i: int, mask: torch.Tensor, positions: torch.Tensor, start: int,
                  key_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Apply a sliding window (Mistral / Qwen sliding layers) on top of `mask`; by default slot s < start sits
        at position s and the new tokens follow (`key_positions`, (S,): every key slot's position otherwise)."""
        attn = self.layers[i].self_attn
        window = getattr(attn, "sliding_window", None)
        if not hasattr(attn, "sliding_window") and self.config.model_type == "mistral":
            window = getattr(self.config, "sliding_window", None)  # Mistral keeps it on the config only
        if not window:
            return mask
        if key_positions is None:
            key_positions = torch.cat([torch.arange(start, device=mask.device), positions])  # (S,)
        return mask & (positions[:, None] - key_positions[None, :] < window)

    def forward_layers(self, h: torch.Tensor, positions: torch.Tensor, cache: KVCache, start: int,
                       mask: torch.Tensor, first: int, last: int, hidden: list | None = None,
                       rope: tuple[torch.Tensor, torch.Tensor] | None = None, slots: torch.Tensor | None = None,
                       key_positions: torch.Tensor | None = None) -> torch.Tensor:
        """Run layers [first, last) on h (T, d); K/V go to slots [start, start + T); mask is (T, start + T).
        `rope`: (cos, sin) for these positions, when a caller running one layer at a time computed them once.
        `slots` (T,): scattered slots instead (a tree's unfed nodes); the mask then covers slots [0, S) and
        `key_positions` (S,) gives each key slot's position (for sliding windows)."""
        cos, sin = rope if rope is not None else self.rope(positions, h)
        for i in range(first, last):
            layer = self.layers[i]
            m = self._windowed(i, mask, positions, start, key_positions)
            h = h + self._attention(i, layer.input_layernorm(h), cos, sin, cache, start, m, slots)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
            if hidden is not None:
                hidden.append(h)
        return h

    @torch.inference_mode()
    def forward(self, tokens: list[int] | torch.Tensor, positions: list[int] | torch.Tensor, cache: KVCache,
                mask: torch.Tensor | None = None, start: int | None = None, return_hidden: bool = False,
                taps: tuple[int, ...] = ()) -> ForwardOut:
        """Run new tokens through every layer. K/V are written at slots [start, start + T) (default: cache.length),
        and cache.length becomes start + T; callers roll back or compact what they do not keep.
        `taps`: hidden-state indices (0 = embeddings, i = input of layer i) to return side by side
        (what a feature-level draft head reads)."""
        tokens = torch.as_tensor(tokens, device=self.device)
        positions = torch.as_tensor(positions, device=self.device)
        start = cache.length if start is None else start
        T = tokens.shape[0]
        if mask is None:
            mask = causal_mask(start, T, self.device)
        h = self.embed(tokens)  # (T, d)
        hidden = [h] if return_hidden or taps else None
        h = self.forward_layers(h, positions, cache, start, mask, 0, self.num_layers, hidden)
        cache.length = start + T
        tapped = torch.cat([hidden[i] for i in taps], -1) if taps else None  # (T, len(taps)·d)
        return ForwardOut(self.head(h), hidden if return_hidden else None, tapped)
