"""What the exit-head trainers (cli/train_exit_heads.py, cli/train_layer_heads.py) share: the corpus split,
random windows, the frozen model's own states and final distribution, the layer-by-layer training loop and
the command line."""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from core.model.causal_lm import CausalLM


def windows(ids: torch.Tensor, batch: int, seq_len: int, gen: torch.Generator) -> torch.Tensor:
    """A batch of random windows: (B, T)."""
    starts = torch.randint(0, max(1, len(ids) - seq_len), (batch,), generator=gen)
    return torch.stack([ids[s: s + seq_len] for s in starts.tolist()])


def teacher(lm: CausalLM, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Hidden states after layers 1..L-1, each (B, T, d), and the final log-distribution (B, T, V)."""
    with torch.no_grad():
        out = lm.hf(input_ids=x.to(lm.device), output_hidden_states=True)
        states = [h.float() for h in out.hidden_states[1: lm.num_layers]]  # intermediate states are pre-norm
        return states, torch.log_softmax(out.logits.float(), -1)


@dataclass
class TrainResult:
    heads: torch.nn.Module
    losses: list[float] = field(default_factory=list)  # the step's loss summed over layers (each / (L - 1))
    seconds: float = 0.0


def fit_per_layer(lm: CausalLM, heads: torch.nn.Module, train_ids: list[int], cfg, layer_losses: Callable,
                  desc: str, postfix: str = "loss", progress: bool = True) -> TrainResult:
    """Train `heads` on the frozen `lm`: AdamW under a one-cycle schedule (cfg.lr, cfg.steps) on random windows
    of `train_ids` (cfg.batch × cfg.seq_len, seeded by cfg.seed). `layer_losses(states, log_p)` gives, for one
    teacher batch, the loss of layer ℓ ∈ 1..L-1 as a function of ℓ; each layer is backpropagated on its own, so
    one layer's graph is alive at a time."""
    opt = torch.optim.AdamW(heads.parameters(), lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(cfg.seed)
    ids = torch.tensor(train_ids)
    result = TrainResult(heads)
    t0 = time.perf_counter()
    bar = tqdm(range(cfg.steps), desc=desc, unit="step", disable=not progress)
    for _ in bar:
        loss_at = layer_losses(*teacher(lm, windows(ids, cfg.batch, cfg.seq_len, gen)))
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for layer in range(1, lm.num_layers):
            loss = loss_at(layer) / (lm.num_layers - 1)
            loss.backward()
            total += loss.item()
        opt.step()
        sched.step()
        result.losses.append(total)
        bar.set_postfix({postfix: f"{total:.3f}"})
    result.seconds = time.perf_counter() - t0
    heads.eval().requires_grad_(False)
    return result


def text_split(lm: CausalLM, path: Path) -> tuple[list[int], list[int], str]:
    ids = lm.tokenizer(path.read_text(encoding="utf-8", errors="replace"), verbose=False)["input_ids"]
    cut = int(len(ids) * 0.9)
    return ids[:cut], ids[cut:], f"{path.name} (last 10% held out)"


def stdlib_split(lm: CausalLM, max_files: int, seed: int) -> tuple[list[int], list[int], str]:
    """Train on a seeded sample of the embedded corpus's train files; evaluate on its held-out files."""
    from cli.corpus import source_files, split
    train, heldout = split(source_files())
    train = random.Random(seed).sample(train, min(max_files, len(train)))
    eot = lm.tokenizer.eos_token_id

    def encode(files) -> list[int]:
        out: list[int] = []
        for f in files:
            out += [eot] + lm.tokenizer(f.read(), add_special_tokens=False, verbose=False)["input_ids"]
        return out
    return encode(train), encode(heldout), f"stdlib: {len(train)} train files, held-out files of cli/corpus.py"


def head_training_parser(doc: str, config) -> argparse.ArgumentParser:
    """The exit-head trainers' shared command line: the model, its text, where the heads and card go, and one
    flag per field of the trainer's `config` dataclass (its defaults are the flags' defaults)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="local model folder or Hub id")
    data = ap.add_mutually_exclusive_group(required=True)
    data.add_argument("--text", type=Path, help="a UTF-8 text file (the last 10%% is held out)")
    data.add_argument("--stdlib", action="store_true", help="the embedded models' corpus (cli/corpus.py)")
    ap.add_argument("--out", type=Path, default=None, help="folder for the heads (default: the model's folder)")
    ap.add_argument("--card", type=Path, default=None, help="model card to write the metrics section into")
    ap.add_argument("--max-files", type=int, default=300, help="--stdlib: train files sampled")
    ap.add_argument("--device", default="auto")
    for name, value in asdict(config()).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    return ap


def load_training_data(args: argparse.Namespace, seq_len: int, seed: int) -> tuple[CausalLM, list[int], list[int], str]:
    """(model, training ids, held-out ids, what the data was) from the parsed flags; a bad model or too little
    text exits with one line."""
    from core.model.loading import ModelLoadError, load_model
    try:
        lm = load_model(args.model, args.device)
        if args.text is not None and not args.text.is_file():
            raise ValueError(f"text file not found: {args.text}")
        train_ids, held_ids, data_desc = (text_split(lm, args.text) if args.text is not None
                                          else stdlib_split(lm, args.max_files, seed))
        if len(train_ids) <= seq_len or not held_ids:
            raise ValueError(f"not enough text: {len(train_ids)} training tokens for windows of {seq_len}")
    except (ValueError, ModelLoadError) as exc:
        sys.exit(f"error: {exc}")
    return lm, train_ids, held_ids, data_desc
