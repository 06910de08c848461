"""Which torch device a --device / SPECSCOPE_DEVICE value means, checked before any model loads."""
from __future__ import annotations

import torch


DEVICE_HELP = "use auto, cpu, cuda or cuda:N"


def pick_device(name: str = "auto") -> torch.device:
    """The torch device for a --device / SPECSCOPE_DEVICE value; a ValueError with one line when it cannot work
    here, so a typo or a missing GPU is reported before any model is loaded."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device '{name}'; {DEVICE_HELP}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("cuda requested but not available (no CUDA GPU or a CPU-only torch); use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"{name} requested but only {torch.cuda.device_count()} CUDA device(s) exist")
    elif dev.type != "cpu":
        raise ValueError(f"device '{name}' is not supported; {DEVICE_HELP}")
    return dev


def native_bf16() -> bool:
    """Whether this CPU has bf16 matrix units (AVX512-BF16 or AMX): there a forward of many rows costs little more
    than one row in bf16, while fp32 pays per row, which is the regime tree verification wants."""
    cpu = getattr(torch, "cpu", None)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)
