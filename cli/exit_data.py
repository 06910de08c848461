"""Text and teacher signals shared by the exit-head trainers (cli/train_exit_heads.py, cli/train_layer_heads.py):
the corpus split, random windows, and the frozen model's own states and final distribution."""
from __future__ import annotations

import argparse
import random
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from core.model import CausalLM


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
    from core.loading import ModelLoadError, load_model
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
