"""Side-by-side runs of `auto` with some of its constants changed, beside fixed budgets: how its thresholds
were chosen (README "auto"). Interleaved prompt by prompt, each variant with its own remembered state, so
machine noise hits every row alike.

    OMP_NUM_THREADS=1 python scripts/auto_variants.py --drafter eagle3 --repeat 4 \
        --variants "auto;NUDGE_EVERY=8;NUDGE_EVERY=16,CALIBRATE_EVERY=8;N=4;N=6;N=8"

A variant is `auto` (its settings as declared), `N=n` (a fixed budget at the embedded preset's shape, T_shape
from --shape-temperature), or comma-separated name=value changes to auto's settings (core/auto/config.py;
upper case works too: NUDGE_EVERY=8), each variant its own AutoConfig and its own memory across prompts.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.auto.budget import AutoMemory  # noqa: E402
from core.auto.config import DEFAULT, AutoConfig  # noqa: E402
from core.drafter_registry import drafter_factory  # noqa: E402
from core.engine import Session  # noqa: E402
from core.knobs import preset_knobs  # noqa: E402
from core.methods import build_method  # noqa: E402
from core.model.loading import DEFAULT_TARGET, load_model  # noqa: E402
from core.prompts import read_prompts  # noqa: E402
from core.sampling import SamplingConfig  # noqa: E402

def variant_config(spec: str) -> AutoConfig:
    """'nudge_every=16,half_life=48' -> auto's settings with those changed."""
    changes = {}
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        if not value:
            raise SystemExit(f"error: '{item}' is not name=value for a setting of auto")
        changes[name.strip().lower()] = float(value)
    try:
        return DEFAULT.replace(**changes)
    except ValueError as exc:
        raise SystemExit(f"error: variant '{spec}': {exc}") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drafter", default="eagle3")
    ap.add_argument("--variants", default="auto;N=4;N=6;N=8", help="';'-separated variants")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--shape-temperature", type=float, default=0.5, help="T_shape of the fixed rows")
    ap.add_argument("--prompts", default="assets/prompts/heldout.jsonl")
    args = ap.parse_args()
    names = [v.strip() for v in args.variants.split(";") if v.strip()]
    runs = {}
    for v in names:
        if v.startswith("N="):
            runs[v] = {**preset_knobs("embedded"), "N": int(v[2:]), "shape_temperature": args.shape_temperature}
        else:
            config = DEFAULT if v == "auto" else variant_config(v)
            runs[v] = {**preset_knobs("auto"), "auto_config": config, "auto_memory": AutoMemory()}
    prompts = [r["prompt"] for r in read_prompts(args.prompts)][: args.limit]
    target = load_model(DEFAULT_TARGET, "cpu")
    make = drafter_factory(args.drafter, target, None, "cpu")
    sampling = SamplingConfig(0.0, 1.0, 0)
    Session(target, build_method("talon", **preset_knobs("auto")), prompts[0], sampling, 8, make()).generate()
    totals = {v: [0, 0.0, 0] for v in names}  # tokens, seconds, steps
    per_repeat = {v: [] for v in names}
    for k in range(args.repeat):
        before = {v: tuple(t) for v, t in totals.items()}
        for prompt in prompts:
            for v in names if k % 2 == 0 else names[::-1]:
                res = Session(target, build_method("talon", **runs[v], record_raw=0), prompt, sampling,
                              args.max_new_tokens, make()).generate()
                t = totals[v]
                t[0], t[1], t[2] = t[0] + len(res.output_ids), t[1] + res.wall_s, t[2] + len(res.traces)
        for v in names:
            per_repeat[v].append((totals[v][0] - before[v][0]) / max(totals[v][1] - before[v][1], 1e-9))
    fixed = [totals[v][0] / totals[v][1] for v in names if v.startswith("N=")]
    best = max(fixed, default=0.0)
    print(f"drafter {args.drafter}, {len(prompts)} prompts, {args.max_new_tokens} tokens, {args.repeat} repeats\n")
    print("| variant | tok/s | of the best fixed N | MAT | ms/step | tok/s per repeat |\n|---|---|---|---|---|---|")
    for v in names:
        tok, s, steps = totals[v]
        share = f"{tok / s / best:.3f}" if best else ""
        reps = " / ".join(f"{x:.1f}" for x in per_repeat[v])
        print(f"| {v} | {tok / s:.1f} | {share} | {tok / steps:.2f} | {1000 * s / steps:.2f} | {reps} |")


if __name__ == "__main__":
    main()
