"""What the EAGLE-3 head's LM head costs a draft level, as decoding sees it (weights out of the cache, as after a
target forward), through the kernel the target's plan picks and through int8 scores (core/eagle3/int8_scores.py),
and how often the int8 scores keep the float top-1 on the head's own states for these prompts.

    OMP_NUM_THREADS=1 python scripts/head_int8_cost.py [--model smollm2] [--prompts P --limit 6]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROWS = (1, 2, 4, 8)
FLUSH_MB = 96  # past this CPU's 32 MiB L3


def cold_ms(fn, x: torch.Tensor, flush: torch.Tensor, reps: int) -> float:
    """The median over reps of fn(x), with the caches flushed before each call."""
    times = []
    for _ in range(reps):
        flush.add_(1)
        t = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


@torch.inference_mode()
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--prompts", default="assets/prompts/real.jsonl")
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--reps", type=int, default=41)
    args = ap.parse_args()
    from core.drafter_registry import drafter_factory
    from core.eagle3.int8_scores import int8_scores
    from core.engine import Session
    from core.methods import build_method
    from core.model.chat import prepare_prompt
    from core.model.loading import load_model
    from core.prompts import read_prompts
    from core.sampling import SamplingConfig
    target = load_model(args.model, "cpu", args.dtype)
    make = drafter_factory("eagle3", target, None, "cpu", {"head_int8": "off"})  # float scores: the baseline's shapes
    head = make().head
    int8 = int8_scores(head.lm_head)
    flush = torch.empty(FLUSH_MB << 20, dtype=torch.uint8)
    w = head.lm_head.weight
    print(f"{args.model} ({target.dtype}): LM head {tuple(w.shape)}, plan {target.plan.describe()}")
    print("| rows | plan's kernel ms | int8 ms |\n|---|---|---|")
    for rows in ROWS:
        x = torch.randn(rows, w.shape[1], dtype=w.dtype)
        print(f"| {rows} | {cold_ms(head.lm_head, x, flush, args.reps):.2f} | {cold_ms(int8, x, flush, args.reps):.2f} |")
    states = []  # the head's own output states while drafting these prompts
    for row in read_prompts(args.prompts)[: args.limit]:
        d = make()
        score = d._logits
        d._logits = lambda st, score=score: states.append(st) or score(st)
        ids = prepare_prompt(target.tokenizer, row["prompt"], "auto").ids
        Session(target, build_method("talon", N=4, K=2, mu=0.1), ids, SamplingConfig(), 48, d).generate()
    s = torch.cat(states)  # (rows, H)
    same = (head.logits(s).float().argmax(-1) == int8(head.norm(s)).argmax(-1)).float().mean()
    print(f"int8 keeps the float top-1 on {float(same):.1%} of {len(s)} draft rows")


if __name__ == "__main__":
    main()
