"""Every knob the page shows: range, default (SPEC's) and a one-line tooltip, plus validation that
turns an out-of-range value into a message a visitor can act on."""
from __future__ import annotations

from dataclasses import dataclass

from core.presets import PRESETS as CORE_PRESETS
from core.specbound import DEFAULTS as SB  # the engine's defaults: the page never disagrees with the CLI


@dataclass(frozen=True)
class Knob:
    name: str  # keyword for build_method / SamplingConfig
    label: str  # paper notation
    minimum: float
    maximum: float
    default: float
    step: float
    info: str
    integer: bool = True


TALON_KNOBS = [
    Knob("N", "N (node budget)", 1, 128, 60, 1, "Drafted nodes per step, root not counted; the same budget is given to the static tree."),
    Knob("K", "K (root width)", 1, 20, 10, 1, "Top-K children kept at the first k levels, however confident the draft is."),
    Knob("mu", "μ (gate)", 0.001, 1.0, 0.03, 0.001, "Keep a candidate when p(u) ≥ μ·m_d; larger μ gives deeper, narrower trees.", False),
    Knob("k_init", "k (Top-K levels)", 0, 4, 1, 1, "Leading levels forced to Top-K before the gate takes over (k = 0: pure gating)."),
]


SPECBOUND_KNOBS = [
    Knob("alpha", "α (annealing)", 0.0, 4.0, float(SB["alpha"]), 0.05, "T_ℓ = 1 + α(1 − ℓ/L): shallow layers' confidences are deflated more; α = 0 turns ACT off.", False),
    Knob("tau_exit", "τ_exit (exit threshold)", 0.05, 1.0, float(SB["tau_exit"]), 0.01, "A drafted token exits at the first layer whose annealed confidence reaches τ_exit.", False),
    Knob("d_max", "d_max (depth bound)", 1, 64, int(SB["d_max"]), 1, "A token that needs more than d_max layers stops drafting: it is a hard token."),
    Knob("w_max", "w_max (width bound)", 1, 32, int(SB["w_max"]), 1, "At most w_max tokens are drafted before the target verifies them."),
]

SAMPLING_KNOBS = [
    Knob("temperature", "temperature", 0.0, 2.0, 0.0, 0.05, "0 = greedy (output must equal plain decoding); > 0 samples, still exactly the target's distribution.", False),
    Knob("seed", "seed", 0, 2**31 - 1, 0, 1, "Seed of the sampler, so a sampling run can be replayed."),
    Knob("max_new_tokens", "max new tokens", 1, 256, 64, 1, "Generation stops after this many tokens (or at end-of-text)."),
]

PRESET_NAMES = {"paper": "paper defaults", "embedded": "best measured, embedded pair",
                "auto": "auto: N chosen per step for this machine"}


def _preset_label(name: str, knobs: dict) -> str:
    """A preset core/ adds later is listed under its own name rather than breaking the page."""
    n = f"N≤{knobs['N']}" if knobs.get("auto") else f"N={knobs['N']}"  # under auto, N is only the cap
    return f"{PRESET_NAMES.get(name, name)} ({n}, K={knobs['K']}, μ={knobs['mu']}, k={knobs['k_init']})"


# The same presets as the CLI's --preset (core/presets.py), labelled for the dropdown.
PRESETS = {_preset_label(name, knobs): knobs for name, knobs in CORE_PRESETS.items()}


def validate(knobs: list[Knob], values: dict) -> dict:
    """Check each value against its knob; returns the values with integers made ints."""
    out = {}
    for k in knobs:
        v = values.get(k.name)
        if v is None or isinstance(v, bool):
            raise ValueError(f"{k.label} is missing")
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{k.label} must be a number (got {v!r})") from None
        if not k.minimum <= v <= k.maximum:
            raise ValueError(f"{k.label} must be between {k.minimum:g} and {k.maximum:g} (got {v:g})")
        if k.integer and v != int(v):
            raise ValueError(f"{k.label} must be a whole number (got {v:g})")
        out[k.name] = int(v) if k.integer else v
    if "mu" in out and out["mu"] <= 0:
        raise ValueError("μ must be > 0")
    return out
