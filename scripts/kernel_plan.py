"""Which kernel computes the target's products on this CPU for each row count, measured now (not read from the
cache): the table behind the plan core/model/linear_kernels.py keeps for a day.

    OMP_NUM_THREADS=1 python scripts/kernel_plan.py [--model assets/models/target] [--reps 5]

Each cell is the median milliseconds of one pass over every decoder product and the LM head, in forward order
(the weights stream from memory as in decoding), the kernels interleaved rep by rep; the last line is the plan
chosen from it (F.linear unless another kernel is at least 5% faster).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from core.model.linear_kernels import SIZES, candidates, describe_ms, measure_plan  # noqa: E402
from core.model.loading import DEFAULT_TARGET, load_model  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=DEFAULT_TARGET)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="row counts, comma-separated")
    args = ap.parse_args(argv)
    sizes = tuple(sorted({int(s) for s in args.sizes.split(",")}))
    lm = load_model(args.model)
    prods = lm.products()
    print(f"{lm.name}: {len(prods)} products, torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          f"the plan in use: {lm.plan.describe()}\n")
    plan, ms = measure_plan(prods, candidates(prods), sizes, args.reps)
    print(describe_ms(ms, sizes))
    print(f"\nmeasured now: {plan.describe()}")


if __name__ == "__main__":
    main()
