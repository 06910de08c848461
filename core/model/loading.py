"""Load a causal LM (local folder or Hub id) safely: safetensors only, never remote code.

Device "auto" picks CUDA when present. Dtype "auto" is bf16 on a GPU and on a CPU with bf16 matrix units
(AVX512-BF16 or AMX: there a many-row forward costs about what one row costs), fp32 on any other CPU (its bf16
products are emulated and slower); SPECSCOPE_DTYPE (fp32 | bf16) overrides what "auto" means on a server.
A real model's short name (core/model/real_models.py, e.g. "smollm2") names its fetched folder.
HF_HUB_OFFLINE is read at every load (not only at import): when set, no socket is opened.
"""
from __future__ import annotations

import functools
import os
import socket
import threading
from pathlib import Path

import torch
from huggingface_hub import constants as hf_constants
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from core.model.causal_lm import SUPPORTED_FAMILIES, CausalLM
from core.model.device import native_bf16, pick_device
from core.model.real_models import REAL_MODELS, complete, model_dir

ASSETS = Path(__file__).resolve().parents[2] / "assets"
DEFAULT_TARGET = str(ASSETS / "models" / "target")
DEFAULT_DRAFT = str(ASSETS / "models" / "draft")


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says why in one line."""


DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


DTYPE_CHOICES = ("auto", "fp32", "bf16")


BF16_MIN_MB = 200  # fp32 weights below this stay fp32 on a CPU: a model that small is not bound by its products


def default_dtype(device: torch.device, weights_mb: float | None = None) -> torch.dtype:
    """What "auto" means here: the operator's SPECSCOPE_DTYPE when set; else bf16 on a GPU, and on a CPU with bf16
    matrix units unless the model is small (`weights_mb`, its fp32 safetensors, below BF16_MIN_MB: the embedded
    pair, whose per-op overhead outweighs its products, runs faster in fp32 with the kernels measured for it);
    else fp32."""
    own = os.environ.get("SPECSCOPE_DTYPE", "").strip().lower()
    if own and own != "auto":
        if own not in DTYPES:
            raise ModelLoadError(f"SPECSCOPE_DTYPE={own!r}: use auto, fp32 or bf16")
        return DTYPES[own]
    if device.type == "cuda":
        return torch.bfloat16
    big = weights_mb is None or weights_mb >= BF16_MIN_MB
    return torch.bfloat16 if native_bf16() and big else torch.float32


def dtype_name(dtype: torch.dtype) -> str:
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))


def why_dtype(dtype: torch.dtype, device: torch.device) -> str:
    """One line for the page and the bench: which precision, and why "auto" would choose it here."""
    if os.environ.get("SPECSCOPE_DTYPE", "").strip().lower() not in ("", "auto"):
        return f"{dtype_name(dtype)} (SPECSCOPE_DTYPE)"
    if device.type == "cuda":
        return f"{dtype_name(dtype)} (a GPU)"
    if not native_bf16():
        return f"{dtype_name(dtype)} (this CPU has no bf16 matrix units)"
    if dtype == torch.float32:
        return f"fp32 (asked for, or under {BF16_MIN_MB} MB: auto keeps a model that small in fp32 here)"
    return "bf16 (this CPU has bf16 matrix units: AVX512-BF16 / AMX)"


def weights_mb(folder: str) -> float | None:
    """A local model's safetensors size (None for a Hub id: every supported Hub model is large)."""
    path = Path(folder)
    return sum(f.stat().st_size for f in path.glob("*.safetensors")) / 1e6 if path.is_dir() else None


def pick_dtype(name: str, device: torch.device, weights: float | None = None) -> torch.dtype:
    """'auto' (default_dtype) or an explicit name, e.g. fp32 on CUDA for the device check."""
    if name == "auto":
        return default_dtype(device, weights)
    if name not in DTYPES:
        raise ModelLoadError(f"unknown dtype '{name}'; use auto, {', '.join(DTYPES)}")
    return DTYPES[name]


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as huggingface_hub reads them, but at call time. When set,
    huggingface_hub's own flag is set too: it is read once at import, and even a local_files_only load
    otherwise fetches a registry from the Hub."""
    env = (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or "").strip().upper()
    offline = env in {"1", "ON", "YES", "TRUE"}
    if offline:
        hf_constants.HF_HUB_OFFLINE = True
    return offline


def _source(name: str) -> tuple[str, bool]:
    """(what to pass to from_pretrained, whether it is a local folder)."""
    if name in REAL_MODELS:
        folder = model_dir(name)
        if not complete(folder):
            raise ModelLoadError(f"'{name}' is not fetched on this machine yet: run python -m cli.get_model {name} "
                                 f"(once, at install time)")
        return str(folder), True
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"'{name}' is a file; a model is a Hugging Face model folder (config.json + "
                                 "safetensors) or a Hub id like 'Qwen/Qwen2.5-0.5B'")
        if not (path / "config.json").exists():
            raise ModelLoadError(f"'{name}' is a folder without config.json, not a Hugging Face model folder")
        return str(path), True
    if name.count("/") != 1 or name.startswith((".", "/")):
        raise ModelLoadError(f"'{name}' is neither a local model folder nor a Hub id like 'Qwen/Qwen2.5-0.5B'")
    return name, False


def hub_reachable(host: str = "huggingface.co", timeout: float = 3.0) -> bool:
    """A quick DNS + TCP check, so an offline machine fails in seconds rather than after HF's retries."""
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def denied_line(name: str, exc: BaseException) -> str | None:
    """One line for a Hub refusal (401/403: a gated or private repository), else None. huggingface_hub reads
    HF_TOKEN from the environment by itself; the line says what to do."""
    text = f"{type(exc).__name__} {exc}"
    if "GatedRepo" in text or "gated" in text.lower() or "401" in text or "403" in text:
        return (f"'{name}' is gated or private on the Hub (401/403): accept its licence on its Hub page and set "
                f"HF_TOKEN to a token that has access (on a Space: as a secret)")
    return None


def _load_config(src: str, local: bool, name: str):
    """Local folder, else the local HF cache, else the Hub when it is allowed (HF_HUB_OFFLINE unset) and reachable."""
    offline = hub_offline()
    attempts = [{}] if local else [dict(local_files_only=True)] + ([] if offline or not hub_reachable() else [{}])
    last = ("not in the local Hugging Face cache and HF_HUB_OFFLINE is set" if offline else
            "not in the local Hugging Face cache and the Hub is unreachable (offline?)")
    for kw in attempts:
        try:
            return AutoConfig.from_pretrained(src, trust_remote_code=False, **kw), kw
        except (OSError, ValueError) as exc:
            if not kw:  # a cache miss says nothing useful; a real attempt's error does
                last = str(exc).splitlines()[0]
                if denied_line(name, exc):
                    raise ModelLoadError(denied_line(name, exc)) from None
    raise ModelLoadError(f"cannot load '{name}': {last}")


_LOAD_LOCK = threading.Lock()


def load_model(name: str = DEFAULT_TARGET, device: str = "auto", dtype: str = "auto") -> CausalLM:
    """Load once per (name, device, dtype); the returned model is shared read-only. Serialised by a lock:
    from_pretrained is not thread-safe (two concurrent loads can meet half-materialised weights)."""
    with _LOAD_LOCK:
        return _load_model(name, device, dtype)


@functools.lru_cache(maxsize=4)
def _load_model(name: str, device: str, dtype: str = "auto") -> CausalLM:
    hf_logging.disable_progress_bar()
    src, local = _source(name)
    try:
        dev = pick_device(device)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None
    torch_dtype = pick_dtype(dtype, dev, weights_mb(src) if local else None)
    config, kw = _load_config(src, local, name)
    if config.model_type not in SUPPORTED_FAMILIES:
        raise ModelLoadError(f"'{name}' is a '{config.model_type}' model; supported families: {', '.join(SUPPORTED_FAMILIES)}")
    try:
        hf = AutoModelForCausalLM.from_pretrained(
            src, trust_remote_code=False, use_safetensors=True, dtype=torch_dtype, **kw
        ).to(dev)
        tokenizer = AutoTokenizer.from_pretrained(src, trust_remote_code=False, **kw)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load '{name}' (safetensors weights are required): {str(exc).splitlines()[0]}") from None
    return CausalLM(hf, tokenizer, name)
