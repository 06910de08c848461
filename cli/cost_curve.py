"""Print this machine's cost curves, t_verify(n) and t_draft(width), as the `auto` budget measures them.

    python -m cli.cost_curve --drafter eagle3 [--device cuda] [--reps 9]
"""
from __future__ import annotations

from cli.common import OneLineParser, add_drafter_knob_flags, device_arg, drafter_knobs, fail, run_main
from core.auto.cost_model import CONTEXT, measure_costs
from core.drafter_registry import DEFAULT_DRAFTER, DRAFTERS, HeadLoadError, drafter_factory
from core.model.loading import DEFAULT_TARGET, DTYPE_CHOICES, ModelLoadError, load_model, why_dtype


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__)
    ap.add_argument("--model", default=DEFAULT_TARGET)
    ap.add_argument("--drafter", default=DEFAULT_DRAFTER, choices=DRAFTERS)
    ap.add_argument("--draft", default=None)
    ap.add_argument("--device", default="auto", type=device_arg)
    ap.add_argument("--dtype", default="auto", choices=DTYPE_CHOICES, help="auto: bf16 where the device computes it "
                    "natively, else fp32")
    ap.add_argument("--reps", type=int, default=9)
    add_drafter_knob_flags(ap)
    args = ap.parse_args(argv)
    try:
        target = load_model(args.model, args.device, args.dtype)
        make = drafter_factory(args.drafter, target, args.draft, args.device, drafter_knobs(args))
    except (ValueError, ModelLoadError, HeadLoadError) as exc:
        fail(str(exc))
    cost = measure_costs(target, make(), args.reps, use_disk=False)
    print(f"# {cost.key}, {why_dtype(target.dtype, target.device)}, context {CONTEXT} tokens, median of {args.reps}")
    print("| n new tokens | " + " | ".join(map(str, cost.verify_n)) + " |")
    print("|---|" + "---|" * len(cost.verify_n))
    print("| t_verify ms | " + " | ".join(f"{x:.1f}" for x in cost.verify_ms) + " |")
    print("| ratio to n = 1 | " + " | ".join(f"{x / cost.verify_ms[0]:.2f}" for x in cost.verify_ms) + " |")
    if cost.retimed:
        print(f"# timed again as outliers (the fastest kept): n = {', '.join(map(str, cost.retimed))}")
    if cost.flag:
        print(f"# warning: {cost.flag}")
    if cost.draft_width:
        print()
        print("| frontier width | " + " | ".join(map(str, cost.draft_width)) + " |")
        print("|---|" + "---|" * len(cost.draft_width))
        print("| t_draft ms | " + " | ".join(f"{x:.2f}" for x in cost.draft_ms) + " |")


if __name__ == "__main__":
    run_main(main)
