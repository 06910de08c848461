"""Where one step's time goes, phase by phase, from the engine's own timers (the trace's build, draft and verify
milliseconds against its whole step_ms) and, for the rest, cProfile's self time grouped by where it is spent.

    OMP_NUM_THREADS=1 python scripts/step_profile.py [--method talon] [--drafter eagle3] [--preset embedded]
        [--prompts 12] [--max-new-tokens 64]

"Engine overhead" is step_ms minus build, draft and verify: committing, compacting the caches, telling the
drafter, building the trace. The second table names the functions behind it (self time, ms per step).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.drafter_registry import drafter_factory  # noqa: E402
from core.engine import Session  # noqa: E402
from core.methods import build_method  # noqa: E402
from core.model.loading import load_model  # noqa: E402
from core.prompts import ASSET_PROMPTS, read_prompts  # noqa: E402


def run(target, method, make, prompts, max_new):
    traces = []
    for p in prompts:
        traces += Session(target, method, p, max_new_tokens=max_new, draft=make()).generate().traces
    return traces


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", default="talon")
    ap.add_argument("--drafter", default="eagle3")
    ap.add_argument("--preset", default="embedded")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--top", type=int, default=12, help="functions listed behind the overhead")
    args = ap.parse_args()
    target = load_model()
    method = build_method(args.method, preset=args.preset)
    make = drafter_factory(args.drafter, target)
    prompts = [r["prompt"] for r in read_prompts(ASSET_PROMPTS)][: args.prompts]
    run(target, method, make, prompts[:1], 8)  # first calls allocate
    t0 = time.perf_counter()
    traces = run(target, method, make, prompts, args.max_new_tokens)
    wall = time.perf_counter() - t0
    n = len(traces)
    step = sum(t.step_ms for t in traces) / n
    phases = {"build (the policy's own logic)": sum(t.build_ms for t in traces) / n,
              "draft (drafter forwards)": sum(t.draft_ms for t in traces) / n,
              "verify (the target's forward and the walk)": sum(t.verify_ms for t in traces) / n}
    phases["engine overhead (commit, caches, drafter update, trace)"] = step - sum(phases.values())
    print(f"## {args.method}@{args.drafter} preset {args.preset}: {n} steps, MAT "
          f"{sum(t.tau for t in traces) / n:.2f}, {step:.2f} ms a step ({wall:.1f} s wall)\n")
    print("| phase | ms per step | share of the step |\n|---|---|---|")
    for name, ms in phases.items():
        print(f"| {name} | {ms:.2f} | {ms / step:.1%} |")
    prof = cProfile.Profile()
    prof.enable()
    run(target, method, make, prompts, args.max_new_tokens)
    prof.disable()
    stats = pstats.Stats(prof).stats
    rows = sorted(((v[2], f"{Path(k[0]).name}:{k[2]}") for k, v in stats.items()), reverse=True)[: args.top]
    print("\n| function (cProfile self time, the whole step) | ms per step |\n|---|---|")
    for tottime, name in rows:
        print(f"| {name} | {1000 * tottime / n:.3f} |")


if __name__ == "__main__":
    main()
