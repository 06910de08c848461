"""What greedy equality looks like in a given dtype and device: chain, TALON and SpecBound against AR on the
embedded pair, with the target's top-2 logit gap wherever a run parts from AR.

    python scripts/dtype_equality.py --device cuda --dtype bf16      # scripts/device_check.sh runs this too
    OMP_NUM_THREADS=1 python scripts/dtype_equality.py --device cpu --dtype bf16 --prompts 40

A near-tie is a first difference where the gap is at most --eps; above it would be a real bug. In bf16 the
logits themselves are rounded to 8 bits of mantissa, so ties (gap 0) and one-step gaps are expected.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import core.lossless_check as eq  # noqa: E402
from core.loading import DEFAULT_DRAFT, DEFAULT_TARGET, load_model  # noqa: E402
from core.methods import build_method  # noqa: E402
from core.prompts import ASSET_PROMPTS, read_prompts  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bf16", help="fp32 | bf16 | fp16")
    ap.add_argument("--prompts", type=int, default=40, help="held-out prompts used (of 40)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--eps", type=float, default=0.0625, help="near-tie threshold on the top-2 logit gap")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    target = load_model(DEFAULT_TARGET, args.device, args.dtype)
    draft = load_model(DEFAULT_DRAFT, args.device, args.dtype)
    prompts = [r["prompt"] for r in read_prompts(ASSET_PROMPTS)][: args.prompts]
    methods = [("chain", build_method("chain", gamma=5)),
               ("talon", build_method("talon", N=16, K=4, mu=0.05, k_init=1)),
               ("specbound", build_method("specbound"))]
    eq.EPS = args.eps
    report = eq.check_greedy_equivalence(target, draft, prompts, methods, max_new_tokens=args.max_new_tokens)
    parted = report.near_ties + report.failures
    gaps = sorted({line.rsplit(" ", 1)[-1] for line in parted})
    print(f"{args.dtype} on {target.device}: {report.compared} greedy runs ({len(prompts)} prompts x "
          f"{args.max_new_tokens} tokens x chain/TALON/SpecBound), identical to AR: {report.compared - len(parted)}, "
          f"near-ties (gap <= {args.eps:g}): {len(report.near_ties)} "
          f"({len(report.near_ties) / max(1, report.compared):.1%}), failures: {len(report.failures)}; "
          f"gaps seen: {', '.join(gaps) or 'none'}; {time.perf_counter() - t0:.0f} s")
    for line in report.failures:
        print("   failure:", line)
    raise SystemExit(1 if report.failures else 0)


if __name__ == "__main__":
    main()
