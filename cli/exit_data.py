"""Text and teacher signals shared by the exit-head trainers (cli/train_exit_heads.py, cli/train_layer_heads.py):
the corpus split, random windows, and the frozen model's own states and final distribution."""
from __future__ import annotations

import random
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
