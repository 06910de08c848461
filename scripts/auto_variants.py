"""Side-by-side runs of `auto` with some of its constants changed, beside fixed budgets: how its thresholds
were chosen (README "auto"). Interleaved prompt by prompt, each variant with its own remembered state, so
machine noise hits every row alike.

    OMP_NUM_THREADS=1 python scripts/auto_variants.py --drafter eagle3 --repeat 4 \
        --variants "auto;NUDGE_EVERY=8;NUDGE_EVERY=16,CALIBRATE_EVERY=8;N=4;N=6;N=8"

A variant is `auto` (the code as it is), `N=n` (a fixed budget at the embedded preset's shape, T_shape from
--shape-temperature), or comma-separated NAME=value overrides of core.auto_budget / core.auto_replay /
core.shape_calibration constants, applied only while that variant decodes.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import core.auto_budget as auto_budget  # noqa: E402
import core.auto_replay as auto_replay  # noqa: E402
import core.shape_calibration as shape_calibration  # noqa: E402
from core.drafter_loading import drafter_factory  # noqa: E402
from core.engine import Session  # noqa: E402
from core.knobs import preset_knobs  # noqa: E402
from core.loading import DEFAULT_TARGET, load_model  # noqa: E402
from core.methods import build_method  # noqa: E402
from core.prompts import read_prompts  # noqa: E402
from core.sampling import SamplingConfig  # noqa: E402

MODULES = (auto_budget, auto_replay, shape_calibration)


def overrides(spec: str) -> dict[tuple[object, str], float]:
    """'NUDGE_EVERY=16,HALF_LIFE=48' -> {(module, name): value}; the module is the one defining the name."""
    out = {}
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        owner = next((m for m in MODULES if hasattr(m, name)), None)
        if owner is None or not value:
            raise SystemExit(f"error: '{item}' is not NAME=value for a constant of auto")
        out[(owner, name)] = type(getattr(owner, name))(float(value))
    return out


@contextlib.contextmanager
def patched(values: dict[tuple[object, str], float]):
    old = {k: getattr(*k) for k in values}
    for (owner, name), v in values.items():
        setattr(owner, name, v)
    try:
        yield
    finally:
        for (owner, name), v in old.items():
            setattr(owner, name, v)


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
            runs[v] = ({**preset_knobs("embedded"), "N": int(v[2:]), "shape_temperature": args.shape_temperature}, {})
        else:
            runs[v] = (preset_knobs("auto"), {} if v == "auto" else overrides(v))
    prompts = [r["prompt"] for r in read_prompts(args.prompts)][: args.limit]
    target = load_model(DEFAULT_TARGET, "cpu")
    make = drafter_factory(args.drafter, target, None, "cpu")
    sampling = SamplingConfig(0.0, 1.0, 0)
    Session(target, build_method("talon", **preset_knobs("auto")), prompts[0], sampling, 8, make()).generate()
    memory = {v: {} for v in names}  # each variant's own remembered auto state
    totals = {v: [0, 0.0, 0] for v in names}  # tokens, seconds, steps
    per_repeat = {v: [] for v in names}
    for k in range(args.repeat):
        before = {v: tuple(t) for v, t in totals.items()}
        for prompt in prompts:
            for v in names if k % 2 == 0 else names[::-1]:
                knobs, values = runs[v]
                auto_budget._MEMORY.clear()
                auto_budget._MEMORY.update(memory[v])
                with patched(values):
                    res = Session(target, build_method("talon", **knobs, record_raw=0), prompt, sampling,
                                  args.max_new_tokens, make()).generate()
                memory[v] = dict(auto_budget._MEMORY)
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
