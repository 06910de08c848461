"""`--compile`: each decoder layer's two dense halves through torch.compile, the attention between them eager.

Why these halves: everything in a layer but the attention over the cache has shapes (T, ·) only, so one
compiled body per half serves all L layers and every step (weights are arguments, T is dynamic: a handful of
graphs, no recompiles as the context grows); the cache write and the masked attention read a cache whose
length changes every step and stay as they are (FusedLayer.attend). Inductor fuses the norm, RoPE, the
residuals and SiLU·up around the products: on a GPU that should mean fewer kernel launches a layer (not
measured there); on this project's CPU every method ran slower with it (docs/app.md, "Measurements behind the
code"), so it is off by default.

Lossless the same way as eager: every method runs the same compiled forward as AR does, so greedy equals AR
token for token (tests/test_compiled_layer.py); logits differ from eager's in the last bits, like any other
kernel choice.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F

from core.model.fused_layer import FusedLayer, rotate_half
from core.model.kv_cache import KVCache

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def rms_norm(h: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The supported families' RMSNorm as a formula (fp32 inside, the weight applied in h's dtype)."""
    x = h.float()
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).to(h.dtype)


def attention_inputs(h: torch.Tensor, norm_w: torch.Tensor, eps: float, qkv_w: torch.Tensor,
                     qkv_b: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor, heads: int, kv_heads: int,
                     head_dim: int, q_norm_w: torch.Tensor | None, k_norm_w: torch.Tensor | None,
                     qk_eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """h (T, d) -> q (H, T, D), k (H_kv, T, D) rotated, v (H_kv, T, D): input norm, stacked q/k/v, Qwen3's
    per-head norms, RoPE."""
    T = h.shape[0]
    out = F.linear(rms_norm(h, norm_w, eps), qkv_w, qkv_b)  # (T, (H + 2·H_kv)·D)
    n_qk = (heads + kv_heads) * head_dim
    qk = out[:, :n_qk].view(T, heads + kv_heads, head_dim)
    if q_norm_w is not None:
        qk = torch.cat([rms_norm(qk[:, :heads], q_norm_w, qk_eps), rms_norm(qk[:, heads:], k_norm_w, qk_eps)], 1)
    qk = qk.transpose(0, 1)  # (H + H_kv, T, D)
    qk = qk * cos + rotate_half(qk) * sin
    return qk[:heads], qk[heads:], out[:, n_qk:].view(T, kv_heads, head_dim).transpose(0, 1)


def residual_mlp(h: torch.Tensor, attended: torch.Tensor, o_w: torch.Tensor, o_b: torch.Tensor | None,
                 norm_w: torch.Tensor, eps: float, gate_up_w: torch.Tensor, gate_up_b: torch.Tensor | None,
                 down_w: torch.Tensor, down_b: torch.Tensor | None, inner: int) -> torch.Tensor:
    """The rest of the layer: h + o_proj(attended), then + down(silu(gate)·up) of its post-attention norm."""
    h = h + F.linear(attended, o_w, o_b)
    gate, up = F.linear(rms_norm(h, norm_w, eps), gate_up_w, gate_up_b).split(inner, -1)  # each (T, I)
    return h + F.linear(F.silu(gate) * up, down_w, down_b)


@dataclass
class CompiledLayers:
    """The two compiled halves, shared by every layer of one model."""
    inputs: Callable
    rest: Callable
    compile_s: float = 0.0  # seconds the warm-up spent compiling

    def layer(self, f: FusedLayer, i: int, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache,
              start: int, mask: torch.Tensor, slots: torch.Tensor | None) -> torch.Tensor:
        """Layer i on h (T, d), as FusedLayer's attention + mlp compute it."""
        qn, kn = f.q_norm, f.k_norm
        q, k, v = self.inputs(h, f.norm_in.weight, f.eps, f.qkv.w, f.qkv.b, cos, sin, f.heads, f.kv_heads,
                              f.head_dim, None if qn is None else qn.weight, None if kn is None else kn.weight,
                              float(getattr(qn, "variance_epsilon", f.eps)))
        attended = f.attend(i, q, k, v, cache, start, mask, slots)  # (T, H·D)
        return self.rest(h, attended, f.o.w, f.o.b, f.norm_post.weight, f.eps, f.gate_up.w, f.gate_up.b,
                         f.down.w, f.down.b, f.inner)


def check_compilable(config: PretrainedConfig, name: str) -> None:
    """A ValueError naming why, where the compiled bodies would not be the layer's own computation."""
    act = getattr(config, "hidden_act", None)
    if act != "silu":
        raise ValueError(f"--compile covers SiLU MLPs only; {name} uses {act!r}")


def compiled_layers() -> CompiledLayers:
    """Both halves through torch.compile (T dynamic): one pair serves every layer of a model. The model turns
    them on for itself (CausalLM.compile_layers)."""
    return CompiledLayers(torch.compile(attention_inputs, dynamic=True), torch.compile(residual_mlp, dynamic=True))


def warm_up(forward: Callable[[int], object]) -> float:
    """Seconds spent compiling by forwards of 1 and 3 tokens (`forward(T)`): dynamo specialises T = 1, and every
    other T shares the dynamic graph."""
    t0 = time.perf_counter()
    for T in (1, 3):
        forward(T)
    return time.perf_counter() - t0
