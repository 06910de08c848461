"""transformers' own forward: what n new tokens cost against one after a fixed context, beside `cli.cost_curve`'s
curve through our forward. Why: whether wide verification is cheap is a property of the CPU (bf16 matrix units)
as much as of our kernels, and the plain forward every other program runs tells the two apart.

    OMP_NUM_THREADS=1 python scripts/hf_forward_cost.py [--model smollm2] [--dtype bf16] [--reps 7]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NEW = (1, 2, 4, 8, 16, 32, 64)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def folder_of(name: str) -> str:
    """A real model's name (cli.get_model) to its folder; anything else is passed through as a folder."""
    from core.model.real_models import REAL_MODELS, complete, resolve
    folder = resolve(name)
    if name in REAL_MODELS and not complete(Path(folder)):
        sys.exit(f"'{name}' is not fetched here yet: python -m cli.get_model {name}")
    return folder


@torch.inference_mode()
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder_of(args.model), dtype=DTYPES[args.dtype]).eval()
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    cache = model(torch.randint(0, vocab, (1, args.context), generator=gen), use_cache=True).past_key_values
    ms = []
    for n in NEW:
        times = []
        for _ in range(args.reps):
            extra = cache.get_seq_length() - args.context
            if extra > 0:  # back to the context alone: each timing appends n tokens to the same prefix
                cache.crop(-extra)
            x = torch.randint(0, vocab, (1, n), generator=gen)
            t = time.perf_counter()
            model(x, past_key_values=cache, use_cache=True)
            times.append((time.perf_counter() - t) * 1000)
        ms.append(statistics.median(times))
    print(f"# transformers forward, {args.model}, {args.dtype}, context {args.context}, median of {args.reps}, "
          f"{torch.get_num_threads()} thread(s)")
    print("| n new tokens | " + " | ".join(map(str, NEW)) + " |")
    print("|---|" + "---|" * len(NEW))
    print("| ms | " + " | ".join(f"{x:.1f}" for x in ms) + " |")
    print("| ratio to n = 1 | " + " | ".join(f"{x / ms[0]:.2f}" for x in ms) + " |")


if __name__ == "__main__":
    main()
