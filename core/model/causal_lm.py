"""Our own forward pass over a Hugging Face causal LM's weights.

Hugging Face loads the config, the safetensors weights and the tokenizer; we run the layers
ourselves so that we control the cache (slot-indexed, see core/model/kv_cache.py), the attention mask
(tree attention) and the positions, and can stop after any layer (early exit). Norms, MLPs
and the rotary embedding are the HF modules themselves, so every family detail they carry
(rope scaling, biases, Qwen3's q/k norms) is used as is.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.model.compiled_layer import CompiledLayers, check_compilable, compiled_layers, warm_up
from core.model.fused_layer import FusedLayer, fuse, products, stale
from core.model.kv_cache import KVCache, cache_dtype
from core.model.linear_kernels import PLAIN, Product, plan_for

SUPPORTED_FAMILIES = ("llama", "qwen2", "qwen3", "mistral")


@dataclass
class ForwardOut:
    logits: torch.Tensor  # (T, V), fp32
    hidden: list[torch.Tensor] | None  # L + 1 entries of (T, d): embeddings, then after each layer
    taps: torch.Tensor | None = None  # (T, len(taps)·d): the requested hidden states side by side


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
        self.cache_dtype = cache_dtype(self.dtype, self.device)  # keys, values and attention (fp32 for bf16 on a CPU)
        self._texts: dict[int, str] = {}  # token id -> its text: traces name every node, so decode each id once
        self._fused: list[FusedLayer] = [fuse(layer, self.config) for layer in self.layers]
        self._lm_head = Product(hf_model.lm_head.weight, hf_model.lm_head.bias)
        self.plan = PLAIN  # which CPU kernel runs each product, by row count (core/model/linear_kernels.py)
        self.use_plan(plan_for(self.products(), self.device, self.signature))
        self.compiled: CompiledLayers | None = None  # compile_layers turns it on (--compile)

    @property
    def signature(self) -> str:
        """The shapes a plan of kernels depends on."""
        c = self.config
        return (f"{c.model_type} L{self.num_layers} d{c.hidden_size} I{c.intermediate_size} "
                f"H{self.n_heads}/{self.n_kv_heads}x{self.head_dim} V{self.vocab_size} {self.dtype}")

    def use_plan(self, plan) -> None:
        """Every product of the forward, the LM head included, computes through `plan` from now on."""
        self.plan = plan
        for p in self.products():
            p.plan = plan

    def products(self) -> list[Product]:
        """Every product of a forward in the order it runs them: each layer's four, then the LM head."""
        return products([self.fused(i) for i in range(self.num_layers)]) + [self._lm_head]

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

    def new_cache(self, max_len: int | None = None, layers: int | None = None) -> KVCache:
        return KVCache(self.num_layers if layers is None else layers, self.n_kv_heads, self.head_dim,
                       max_len or self.max_context, self.cache_dtype, self.device)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.body.embed_tokens(tokens)  # (T,) -> (T, d)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Final norm + LM head: (T, d) -> (T, V) fp32 logits."""
        head = self._lm_head
        if head.w is not self.hf.lm_head.weight:  # a new Parameter since load (re-tied or replaced): read it
            head = self._lm_head = Product(self.hf.lm_head.weight, self.hf.lm_head.bias, self.plan)
        return head(self.body.norm(h)).float()

    def rope(self, positions: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.body.rotary_emb(like[None], positions[None])  # each (1, T, D)
        return cos[0], sin[0]  # (T, D)

    def fused(self, i: int) -> FusedLayer:
        """Layer i as the forward runs it (read again if someone replaced its weights since)."""
        f = self._fused[i]
        if stale(self.layers[i], f):
            f = self._fused[i] = fuse(self.layers[i], self.config, self.plan)
        return f

    def compile_layers(self, warm: bool = True) -> CompiledLayers:
        """`--compile`: from now on every forward_layers call runs each layer's two dense halves compiled
        (core/model/compiled_layer.py); `warm` compiles them now, so no timed step pays for it."""
        check_compilable(self.config, self.name)
        self.compiled = compiled_layers()
        if warm:
            self.compiled.compile_s = warm_up(lambda T: self.forward(list(range(1, T + 1)), list(range(T)), self.new_cache(8)))
        return self.compiled

    def input_norm(self, i: int, h: torch.Tensor) -> torch.Tensor:
        """Layer i's input RMSNorm (T, d) -> (T, d): the one every path through layer i uses."""
        f = self.fused(i)
        return f.norm(f.norm_in, h)

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
            f = self.fused(i)
            m = f.windowed(mask, positions, start, key_positions)
            if self.compiled is None:
                h = h + f.attention(i, f.norm(f.norm_in, h), cos, sin, cache, start, m, slots)
                h = h + f.mlp(f.norm(f.norm_post, h))
            else:
                h = self.compiled.layer(f, i, h, cos, sin, cache, start, m, slots)
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
