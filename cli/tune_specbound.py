"""Measure SpecBound knob settings against AR on held-out prompts (how the defaults were chosen).

    python -m cli.tune_specbound [--model PATH] [--prompts FILE] [--n 12] [--max-new-tokens 64] [--repeat 1]
        [--preset paper|fast] [--grid alpha=0,1,2 tau_exit=0.05,0.1 d_max=2,4,6,8 w_max=6,10 min_exit_layer=2,3]

Prints one row per setting: MAT (tokens per full-depth verification), δ (draft layers / L per step),
modelled R = MAT / (1 + δ) and R with the costs measured (Rc: the layers verification ran, the final head),
the share of layer passes saved against AR (exit checks counted in layers),
drafted-token acceptance, head evaluations per token, and the wall-clock speed-up over AR measured in the same
run. With --repeat R, AR and every setting run R times, interleaved (every other pass in reverse order), and the
speed-up is over summed times: settings a few per cent apart swap places from run to run on a noisy machine otherwise.
"""
from __future__ import annotations

import argparse
import itertools
import math
import time
from dataclasses import dataclass

import torch

from cli.common import run_main
from core import knobs
from core.ar import ARMethod
from core.engine import Session
from core.metrics import curve_r, modelled_r, speedup
from core.model.exit_heads import heads_for, store_exit_layers
from core.model.chat import CHAT_MODES, ChatError, prepare_prompt
from core.model.loading import DEFAULT_TARGET, DTYPE_CHOICES, load_model
from core.prompts import ASSET_PROMPTS, read_prompts
from core.specbound.method import build_specbound_method


NAMES = [k.name for k in knobs.METHOD_KNOBS["specbound"]]


@dataclass
class SettingResult:
    knobs: dict
    mat: float
    delta: float
    saved: float
    acceptance: float
    heads_per_token: float
    ms_per_token: float
    r_costed: float | None = None  # R with the costs measured (core/metrics.py curve_r)

    @property
    def r_model(self) -> float:
        return modelled_r(self.mat, 1.0, self.delta)  # SpecBound's δ is already in target forwards: c = 1


def run(lm, method, prompts: list[list[int]], max_new_tokens: int) -> tuple[list, float]:
    results, t0 = [], time.perf_counter()
    for p in prompts:
        results.append(Session(lm, method, p, max_new_tokens=max_new_tokens).generate())
    return results, time.perf_counter() - t0


def measure_setting(lm, knobs: dict, prompts: list[list[int]], max_new_tokens: int) -> SettingResult:
    method = build_specbound_method(record_raw=False, **knobs)  # timed as the bench times it: no page-only work
    results, wall = run(lm, method, prompts, max_new_tokens)
    traces = [t for r in results for t in r.traces]
    tokens = sum(len(r.output_ids) for r in results)
    drafted = sum(len(t.nodes) for t in traces)
    computed = sum(t.specbound.layers_equivalent for t in traces)  # exit checks counted in layers
    full = sum(t.specbound.layers_full_equivalent for t in traces)
    return SettingResult(knobs, tokens / len(traces), sum(t.delta for t in traces) / len(traces), 1 - computed / full,
               sum(t.accepted for t in traces) / max(1, drafted),
               sum(t.specbound.head_evals for t in traces) / tokens, 1000 * wall / tokens,
               curve_r(traces, None))  # SpecBound's trace carries its own costs: no curve needed


def parse_grid(items: list[str]) -> list[dict]:
    axes = {}
    for item in items:
        name, _, values = item.partition("=")
        if name not in NAMES:
            raise SystemExit(f"error: unknown knob '{name}' (choose from {', '.join(NAMES)})")
        try:
            axes[name] = [knobs.ALL_KNOBS[name].check(v) for v in values.split(",")]  # exit_layers: "2;4"
        except ValueError as exc:
            raise SystemExit(f"error: {exc}") from None
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*axes.values())] or [{}]


@torch.inference_mode()
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_TARGET)
    ap.add_argument("--prompts", default=str(ASSET_PROMPTS))
    ap.add_argument("--n", type=int, default=12, help="prompts used")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--grid", nargs="*", default=[], help="knob=v1,v2 ... (others: the defaults); exit_layers "
                    "values separate their layers with ';' (exit_layers=4,2;4,all)")
    ap.add_argument("--choose-exit-layers", action="store_true",
                    help="measure every single exit layer from the lowest to d_max and every layer together (at the "
                         "grid's first setting), and store the fastest set with the heads as SpecBound's default")
    ap.add_argument("--repeat", type=int, default=1, help="passes over AR and every setting, interleaved")
    ap.add_argument("--dtype", default="auto", choices=DTYPE_CHOICES)
    ap.add_argument("--chat", default="auto", choices=CHAT_MODES, help="the target's chat template around each "
                    "prompt (auto: when its tokenizer has one), as cli.bench and cli.generate do")
    ap.add_argument("--preset", default=None, choices=knobs.presets_for("specbound"),
                    help="the knobs the grid does not set (default: paper; fast with --choose-exit-layers, whose "
                         "stored set is the fast preset's)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        raise SystemExit("error: --repeat must be at least 1")
    lm = load_model(args.model, "cpu", args.dtype)
    texts = [r["prompt"] for r in read_prompts(args.prompts)][: args.n]
    try:
        prompts = [prepare_prompt(lm.tokenizer, t, args.chat).ids for t in texts]  # as decoding sees them
    except ChatError as exc:
        raise SystemExit(f"error: --chat {args.chat}: {exc}") from None
    preset = args.preset or ("fast" if args.choose_exit_layers else "paper")
    grid = [{"preset": preset, **g} for g in parse_grid(args.grid)]
    if args.choose_exit_layers:
        base = knobs.resolve("specbound", grid[0])
        sets = [str(ell) for ell in range(base["min_exit_layer"], min(base["d_max"], lm.num_layers) + 1)] + ["all"]
        grid = [{**grid[0], "exit_layers": layers} for layers in sets]
    ar_ms, ms = 0.0, [0.0] * len(grid)  # summed over passes
    rows: list[SettingResult | None] = [None] * len(grid)
    for k in range(args.repeat):
        ar_results, ar_wall = run(lm, ARMethod(), prompts, args.max_new_tokens)
        ar_ms += 1000 * ar_wall / sum(len(r.output_ids) for r in ar_results)
        for i in range(len(grid)) if k % 2 == 0 else reversed(range(len(grid))):
            rows[i] = measure_setting(lm, grid[i], prompts, args.max_new_tokens)
            ms[i] += rows[i].ms_per_token
    print(f"model {args.model} (L = {lm.num_layers}, heads: {heads_for(lm).kind}); {len(prompts)} prompts, "
          f"{args.max_new_tokens} new tokens, {args.repeat} pass(es); AR {ar_ms / args.repeat:.1f} ms/token")
    print(f"{'knobs':58} {'MAT':>5} {'δ':>5} {'R':>5} {'Rc':>5} {'saved':>6} {'acc':>5} {'heads/t':>7} {'wall×':>6}")
    speed = {}
    for setting, row, t in zip(grid, rows, ms):
        shown = " ".join(f"{k}={v}" for k, v in knobs.resolve("specbound", setting).items())
        speed[setting.get("exit_layers", "default")] = speedup(ar_ms, t)
        rc = math.nan if row.r_costed is None else row.r_costed
        print(f"{shown:58} {row.mat:5.2f} {row.delta:5.2f} {row.r_model:5.2f} {rc:5.2f} {row.saved:6.1%} "
              f"{row.acceptance:5.2f} {row.heads_per_token:7.2f} {speedup(ar_ms, t):6.2f}", flush=True)
    if args.choose_exit_layers:
        best = max(speed, key=speed.get)
        layers = list(range(1, lm.num_layers + 1)) if best == "all" else [int(x) for x in best.split(";")]
        measured = {"speedup_over_ar": {k: round(v, 3) for k, v in speed.items()}, "prompts": len(prompts),
                    "max_new_tokens": args.max_new_tokens, "repeat": args.repeat,
                    "knobs": {k: v for k, v in knobs.resolve("specbound", grid[0]).items() if k != "exit_layers"}}
        try:
            where = store_exit_layers(lm, layers, measured)
        except ValueError as exc:
            raise SystemExit(f"error: {exc}") from None
        print(f"stored exit layers {best} in {where}")


if __name__ == "__main__":
    run_main(main)
