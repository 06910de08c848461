"""A preallocated key/value cache indexed by slot (= position of a committed token).

Rejecting speculated tokens costs nothing: move `length` back. After a tree step the
accepted path's entries sit at scattered slots; `compact` gathers them into place.
"""
from __future__ import annotations

import torch


def cache_dtype(model_dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype keys, values and the attention over them are kept in: fp32 for a bf16 model on a CPU, whose
    bf16 attention cost 250 µs a layer for one query against fp32's 46 (SmolLM2's shapes, one thread,
    docs/app.md); a bf16 key or value widens to fp32 exactly, so only the softmax and its sums gain bits.
    The model's own dtype elsewhere."""
    return torch.float32 if device.type == "cpu" and model_dtype == torch.bfloat16 else model_dtype


class KVCache:
    """k, v: (L, H_kv, S_max, D). Slots [0, length) hold committed tokens; writes beyond are scratch."""

    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, max_len: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        shape = (num_layers, num_kv_heads, max_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    @property
    def max_len(self) -> int:
        return self.k.shape[2]

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (H_kv, T, D) go to slots [start, start + T) of `layer`."""
        end = start + k.shape[1]
        if end > self.max_len:
            raise ValueError(f"KV cache overflow: need {end} slots, have {self.max_len}")
        self.k[layer, :, start:end] = k
        self.v[layer, :, start:end] = v

    def write_at(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: (H_kv, T, D) go to the scattered `slots` (T,) of `layer`."""
        if len(slots) and int(slots.max()) >= self.max_len:
            raise ValueError(f"KV cache overflow: need slot {int(slots.max())}, have {self.max_len}")
        self.k[layer, :, slots] = k
        self.v[layer, :, slots] = v

    def view(self, layer: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of slots [0, end): each (H_kv, end, D)."""
        return self.k[layer, :, :end], self.v[layer, :, :end]

    def rollback(self, length: int) -> None:
        if not 0 <= length <= self.max_len:
            raise ValueError(f"rollback to {length} outside [0, {self.max_len}]")
        self.length = length

    def compact(self, slots: list[int], start: int) -> None:
        """Move the entries at `slots` (in order) to [start, start + len(slots)) and make that the end.

        Sources are gathered before writing, so overlapping ranges are safe.
        """
        if slots:
            src = torch.as_tensor(slots, device=self.k.device)
            dst = slice(start, start + len(slots))
            self.k[:, :, dst] = self.k[:, :, src].clone()  # (L, H, n, D)
            self.v[:, :, dst] = self.v[:, :, src].clone()
        self.rollback(start + len(slots))
