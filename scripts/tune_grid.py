"""The Tune tab's sweep without the page: the same grid, the same AR passes and ranges (ui/tune.py), printed as
markdown tables, so a README figure comes with the command that made it (not a test: it times things).

    OMP_NUM_THREADS=1 python scripts/tune_grid.py                                  # the tab's first sweep
    OMP_NUM_THREADS=1 python scripts/tune_grid.py --sweep "SpecBound: α × τ_exit" --prompts 5 --max-new-tokens 64
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ui.examples import example_prompts  # noqa: E402
from ui.handlers import make_config  # noqa: E402
from ui.sweeps import SWEEPS, fixed_text, symbol  # noqa: E402
from ui.tune import SweepResult, grid, sweep  # noqa: E402


def table(res: SweepResult, value) -> list[str]:
    """One markdown table: a row per y, a column per x, each cell `value(score)`."""
    g = res.grid
    head = f"| {symbol(g.y_name) or '–'} \\ {symbol(g.x_name)} | " + " | ".join(f"{x:g}" for x in g.xs) + " |"
    rows = [head, "|---|" + "---|" * len(g.xs)]
    for y, row in zip(g.ys, res.scores):
        cells = ["—" if c is None else value(c) for c in row]
        rows.append(f"| {'' if y is None else f'{y:g}'} | " + " | ".join(cells) + " |")
    return rows


def speed(c) -> str:
    s = c.speedup
    if s is None:
        return "—"
    spread = f" ({s.lo:.2f}–{s.hi:.2f})" if s.lo is not None else ""
    return f"{s.value:.2f}×{spread}" + (" ⚠" if c.few else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", default=next(iter(SWEEPS)), choices=list(SWEEPS))
    ap.add_argument("--x", default=None, help="x values (default: the sweep's)")
    ap.add_argument("--y", default=None, help="y values (default: the sweep's)")
    ap.add_argument("--fixed", default=None, help="fixed knobs, 'K = 2, T_shape = 0.5' (default: the sweep's)")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--drafter", default="eagle3")
    args = ap.parse_args()
    s = SWEEPS[args.sweep]
    g = grid(args.sweep, args.x or s.xs, args.y or s.ys, args.fixed)
    prompts = list(example_prompts()[:args.prompts])
    cfg = make_config("ar", prompts[0], {}, [], {"temperature": 0.0, "seed": 0, "max_new_tokens": args.max_new_tokens},
                      "embedded", "embedded", args.drafter)
    t0 = time.perf_counter()
    *_, res = sweep(g, prompts, cfg)
    on = f" on {args.drafter}" if g.method in ("chain", "static", "talon") else ""
    print(f"# {args.sweep}{on}: {args.prompts} prompt(s) × {args.max_new_tokens} tokens, greedy; "
          f"held: {fixed_text(g.held) or 'nothing'}; {time.perf_counter() - t0:.0f} s")
    print("\nspeed-up over AR (10th–90th percentile; ⚠ too few tokens to rank)\n")
    print("\n".join(table(res, speed)))
    print("\nMAT\n")
    print("\n".join(table(res, lambda c: f"{c.mat:.2f}")))


if __name__ == "__main__":
    main()
