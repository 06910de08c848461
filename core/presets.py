"""Named knob settings for the tree methods: the papers' defaults and the best measured on the embedded pair.

The embedded pair's best settings come from `python -m cli.bench ... --sweep-N ... --sweep-mu ...`
(tables in README.md): on a CPU, verifying a tree costs about linearly in its size, so the fastest budget
is small (N = 16); μ larger than the paper's buys MAT with more draft forwards, which the CPU does not repay.
"""
from __future__ import annotations

PRESETS: dict[str, dict[str, float | int]] = {
    "paper": {"N": 60, "K": 10, "mu": 0.03, "k_init": 1, "depth": 8},
    "embedded": {"N": 16, "K": 10, "mu": 0.03, "k_init": 1, "depth": 8},
    # N chosen per step for this machine (core/auto_budget.py); N here is only the cap
    "auto": {"N": 96, "K": 10, "mu": 0.03, "k_init": 1, "depth": 8, "auto": 1},
}


def preset_knobs(name: str) -> dict:
    if name not in PRESETS:
        raise ValueError(f"unknown preset '{name}' (choose from {', '.join(PRESETS)})")
    return dict(PRESETS[name])
