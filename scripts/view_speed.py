"""Measure each stepping view's presets on this machine and write docs/bench/view_speed.json, which the line
above each view reads (ui/preset_line.py) until the visitor's own run has a measured speed-up.

    OMP_NUM_THREADS=1 python scripts/view_speed.py [--prompts 3] [--max-new-tokens 32]

Each preset, as core/knobs.PRESETS holds it now, runs greedy on the first example prompts to the end; plain AR
is timed before and after and averaged per position (as Compare and Tune do), and the speed-up is AR's time
over the preset's for the same positions, with its range. An entry names the exact knobs it measured, so a
preset retuned later is not labelled with an old number: run this again after changing a preset."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import knobs as core_knobs  # noqa: E402
from core.metrics import pooled_spread  # noqa: E402
from core.model.cost_cache import fingerprint  # noqa: E402
from ui.baseline import full_ar_pass  # noqa: E402
from ui.config import RunConfig  # noqa: E402
from ui.examples import example_prompts  # noqa: E402
from ui.preset_line import BENCH  # noqa: E402
from ui.run import Run  # noqa: E402


def time_preset(method: str, preset: str, prompts: list[str], max_new: int) -> dict:
    knobs = core_knobs.resolve(method, {"preset": preset})
    runs, before, after = [], [], []
    for prompt in prompts:
        cfg = RunConfig(method, prompt, tuple(knobs.items()), max_new_tokens=max_new)
        before.append(full_ar_pass(cfg.target, prompt, cfg.sampling, max_new).snapshot())
        run = Run(replace(cfg)).to_end()
        runs.append(([t.tau for t in run.traces], run.step_ms))
        run.forget()
        after.append(full_ar_pass(cfg.target, prompt, cfg.sampling, max_new).snapshot())
    sp = pooled_spread(runs, [before, after])
    return {"preset": preset, "knobs": knobs, "speedup": None if sp is None else round(sp.value, 3),
            "lo": None if sp is None or sp.lo is None else round(sp.lo, 3),
            "hi": None if sp is None or sp.hi is None else round(sp.hi, 3),
            "prompts": len(prompts), "max_new_tokens": max_new, "measured": time.strftime("%Y-%m-%d")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--out", default=str(BENCH))
    args = ap.parse_args(argv)
    prompts = list(example_prompts()[: args.prompts])
    views = {view: [time_preset(view, p, prompts, args.max_new_tokens) for p in core_knobs.presets_for(view)
                    if not core_knobs.PRESETS[p].get("auto")]  # auto's N changes per step: its own measurements
             for view in ("talon", "specbound")}
    Path(args.out).write_text(json.dumps({"machine": fingerprint("cpu"), "views": views}, indent=1) + "\n")
    for view, entries in views.items():
        for e in entries:
            print(f"{view} {e['preset']}: {e['speedup']}× ({e['lo']}–{e['hi']})")


if __name__ == "__main__":
    main()
