"""Small helpers shared by the trainers: autocast, batches, the encoded corpus, held-out evaluation, model-card
sections (device choice: core.model.device)."""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import AutoModelForCausalLM, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from cli.corpus import source_files, split


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


def batch(data: np.ndarray, seed: int, step: int, batch_size: int, seq_len: int) -> torch.Tensor:
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(data) - seq_len - 1, size=batch_size)
    return torch.from_numpy(np.stack([data[s : s + seq_len + 1] for s in starts]).astype(np.int64))  # (B, T+1)


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def set_lr(opt: torch.optim.Optimizer, step: int, total: int, peak: float) -> None:
    """Every trainer's schedule: linear warm-up over min(50, total/10 + 1) steps, then cosine to 10% of peak."""
    lr = lr_at(step, total, peak, warmup=min(50, total // 10 + 1))
    for group in opt.param_groups:
        group["lr"] = lr


def write_card(path: Path, section: str, start: str, end: str) -> None:
    """Replace a trainer's marked section (from `start` to `end`) of the model card, or append it; the rest
    of the card is left alone."""
    text = path.read_text() if path.is_file() else ""
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + section.rstrip("\n") + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section
    path.write_text(text)


def encode_texts(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str], total: int | None = None) -> np.ndarray:
    """One uint16 stream: text, EOT, text, EOT, ... (the layout every trainer here reads)."""
    eot = tokenizer.eos_token_id
    ids: list[int] = []
    for text in tqdm(texts, desc="encode", unit="file", total=total):
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(eot)
    return np.asarray(ids, dtype=np.uint16)


def encode(tokenizer: PreTrainedTokenizerFast, files: list) -> np.ndarray:
    return encode_texts(tokenizer, (f.read() for f in files), len(files))


def corpus(tokenizer: PreTrainedTokenizerFast, work: Path) -> tuple[np.ndarray, np.ndarray]:
    """(train ids, held-out ids), cached in --work."""
    paths = work / "train_ids.npy", work / "heldout_ids.npy"
    if not all(p.exists() for p in paths):
        train, heldout = split(source_files())
        np.save(paths[0], encode(tokenizer, train))
        np.save(paths[1], encode(tokenizer, heldout))
    return np.load(paths[0]), np.load(paths[1])
