"""Small helpers shared by the trainers: device choice, autocast, held-out evaluation."""
from __future__ import annotations

import contextlib
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, PreTrainedTokenizerBase


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


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast: native on CUDA, and on CPUs with AVX-512-BF16 it beats fp32 for training."""
    return torch.autocast(device.type, dtype=torch.bfloat16)


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors")) / 1e6


@torch.inference_mode()
def heldout_metrics(target_dir: Path, draft_dir: Path, files: list, tokenizer: PreTrainedTokenizerBase,
                    chunk: int = 1024) -> dict:
    """Held-out cross-entropy (nats/token) of both models and the draft's greedy top-1 agreement with the target."""
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32).eval()
    eot = tokenizer.eos_token_id
    sums = {"target_nll": 0.0, "draft_nll": 0.0, "agree": 0, "n": 0, "bytes": 0}
    for f in files:
        text = f.read()
        sums["bytes"] += len(text.encode("utf-8"))
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = [eot] + ids
        for s in range(0, len(ids) - 1, chunk):
            x = torch.tensor([ids[s : s + chunk + 1]])  # (1, T+1)
            if x.shape[1] < 2:
                continue
            inp, y = x[:, :-1], x[0, 1:]
            lt = target(input_ids=inp).logits[0]  # (T, V)
            ld = draft(input_ids=inp).logits[0]
            sums["target_nll"] += F.cross_entropy(lt, y, reduction="sum").item()
            sums["draft_nll"] += F.cross_entropy(ld, y, reduction="sum").item()
            sums["agree"] += (lt.argmax(-1) == ld.argmax(-1)).sum().item()
            sums["n"] += y.numel()
    n = max(1, sums["n"])
    return {
        "heldout_tokens": sums["n"],
        "heldout_bytes": sums["bytes"],
        "target_heldout_ce": sums["target_nll"] / n,
        "draft_heldout_ce": sums["draft_nll"] / n,
        "draft_greedy_agreement": sums["agree"] / n,
        "target_params": sum(p.numel() for p in target.parameters()),
        "draft_params": sum(p.numel() for p in draft.parameters()),
        "target_mb": folder_mb(Path(target_dir)),
        "draft_mb": folder_mb(Path(draft_dir)),
    }
