"""A plain EAGLE-3 head's layer read once into stacked products, for drafting.

Why: a draft level at batch size one is mostly per-op cost, not arithmetic. On SmolLM2's head (one thread, the
2-core EPYC) the module path's forward over one node took 1.06 ms, of which its seven products were about
0.45; the same layer with q/k/v as one product, gate/up as one, the norms as formulas and no module calls took
0.73 ms. q/k/v read the same input and so do gate/up, so each group is one product over stacked rows, as the
target's own layers run (core/model/fused_layer.py): every output row is the same dot product as before.

Only the published single-layer head without variants takes this path (no biases, no per-head q/k norms);
any other head runs its modules (`fused_head` returns None). The stacked copies are remade when the head's
weights change (as when it trains), as the int8 copy of its LM head is.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from core.eagle3.head import EagleHead
from core.model.compiled_layer import rms_norm
from core.model.fused_layer import rotate_half
from core.model.linear_kernels import LinearPlan, Product, weight_version

# layer i, its new k, v (H_kv, T, D) -> every key and value it attends to (H_kv, S, D)
KV = Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
_CACHE: "weakref.WeakKeyDictionary[EagleHead, FusedHead]" = weakref.WeakKeyDictionary()


@dataclass
class FusedHead:
    qkv: Product  # W (n_q + 2·n_kv, 2H): q_proj, k_proj, v_proj rows
    o: Product  # W (H, n_q)
    gate_up: Product  # W (2·I, H)
    down: Product  # W (H, I)
    read_from: tuple  # the versions of the module weights these copies were made from

    def forward(self, head: EagleHead, emb: torch.Tensor, state: torch.Tensor, positions: torch.Tensor, kv: KV,
                mask: torch.Tensor) -> torch.Tensor:
        """The EAGLE layer over T entries: emb, state (T, H); positions (T,); mask (T, S). -> output state (T, H)."""
        c, mid = head.config, head.midlayer
        T, nh, nkv, D = emb.shape[0], c.num_attention_heads, c.num_key_value_heads, c.hd
        cos, sin = (t[0] for t in head.rope(positions[None], emb.dtype))  # each (1, T, D)
        normed_state = rms_norm(state, mid.hidden_norm.weight, c.rms_norm_eps)  # (T, H)
        x = torch.cat((rms_norm(emb, mid.input_layernorm.weight, c.rms_norm_eps), normed_state), -1)  # (T, 2H)
        out = self.qkv(x)  # (T, (nh + 2·nkv)·D)
        n_qk = (nh + nkv) * D
        qk = out[:, :n_qk].view(T, nh + nkv, D).transpose(0, 1)  # (nh + nkv, T, D)
        qk = qk * cos + rotate_half(qk) * sin
        keys, values = kv(0, qk[nh:], out[:, n_qk:].view(T, nkv, D).transpose(0, 1))  # each (nkv, S, D)
        att = F.scaled_dot_product_attention(qk[:nh][None].to(keys.dtype), keys[None], values[None],
                                             attn_mask=mask, enable_gqa=nh != nkv)[0]  # (nh, T, D)
        residual = normed_state if c.norm_before_residual else state
        h = residual + self.o(att.transpose(0, 1).reshape(T, nh * D).to(emb.dtype))
        gate, up = self.gate_up(rms_norm(h, mid.post_attention_layernorm.weight, c.rms_norm_eps)).split(
            c.intermediate_size, -1)  # each (T, I)
        return h + self.down(mid.mlp.act(gate) * up)


def _weights(head: EagleHead) -> list[torch.Tensor]:
    a, m = head.midlayer.self_attn, head.midlayer.mlp
    return [a.q_proj.weight, a.k_proj.weight, a.v_proj.weight, a.o_proj.weight, m.gate_proj.weight,
            m.up_proj.weight, m.down_proj.weight]


def fusable(head: EagleHead) -> bool:
    """The heads this path computes exactly as their modules do: one layer, no biases, no q/k norms."""
    c = head.config
    return c.num_hidden_layers == 1 and not c.biases and not c.qk_norm


def fused_head(head: EagleHead, plan: LinearPlan) -> FusedHead | None:
    """The head's stacked products (made once per weights, shared by every drafter on the head), or None for a
    head with variants."""
    if not fusable(head):
        return None
    ws = _weights(head)
    versions = tuple(weight_version(w) for w in ws)
    held = _CACHE.get(head)
    if held is None or held.read_from != versions:
        with torch.no_grad():
            q, k, v, o, g, u, d = (w.detach() for w in ws)
            held = FusedHead(Product(torch.cat([q, k, v]), None, plan), Product(o, None, plan),
                             Product(torch.cat([g, u]), None, plan), Product(d, None, plan), versions)
        _CACHE[head] = held
    for p in (held.qkv, held.o, held.gate_up, held.down):
        p.plan = plan
    return held
