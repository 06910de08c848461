"""The knobs the page shows, as sliders over the declared knobs (core/knobs.py: range, default, symbol), with
the range a page should offer and a tooltip; plus validation that turns an out-of-range value into a message
a visitor can act on."""
from __future__ import annotations

from dataclasses import dataclass

from core import knobs as core_knobs  # declared once: the page never disagrees with the CLI


@dataclass(frozen=True)
class Knob:
    """A slider: one declared knob (core/knobs.py) within the range a page should offer."""
    name: str  # keyword for build_method / SamplingConfig
    label: str  # paper notation
    minimum: float
    maximum: float
    default: float
    step: float
    info: str
    integer: bool = True


def slider(k: core_knobs.Knob, label: str | None = None, info: str | None = None) -> Knob:
    lo = k.ui_min if k.ui_min is not None else k.minimum
    hi = k.ui_max if k.ui_max is not None else k.maximum
    help_text = info or (k.help[0].upper() + k.help[1:] + ".")
    return Knob(k.name, label or k.label, lo, hi, k.default, k.step, help_text, k.kind is int)


TALON_KNOBS = [
    slider(core_knobs.N, info="Drafted nodes per step, root not counted; the same budget is given to the static tree."),
    slider(core_knobs.K, "K (root width)", "Top-K children kept at the first k levels, however confident the draft is."),
    slider(core_knobs.MU, "μ (gate)", "Keep a candidate when p(u) ≥ μ·m_d; larger μ gives deeper, narrower trees."),
    slider(core_knobs.K_INIT, info="Leading levels forced to Top-K before the gate takes over (k = 0: pure gating)."),
    slider(core_knobs.SHAPE_T, "T_shape (sharpen q)", "The trees see softmax(z / T_shape) of the drafter's logits: "
           "below 1 sharpens a flat q so the gate goes deeper. Ours, not the paper's; verification is untouched."),
]

OURS = core_knobs.OURS
SPECBOUND_KNOBS = [
    slider(core_knobs.ALPHA, info="T_ℓ = 1 + α(1 − ℓ/L): shallow layers' confidences are deflated more; α = 0 turns "
                                  "ACT off. The paper gives no value: 0.5 is ours."),
    slider(core_knobs.TAU_EXIT),
    slider(core_knobs.D_MAX, info="A token that reaches d_max layers without exiting ends the block: a check "
                                  f"always happens at d_max. Above L it is L, where a token always exits ({OURS})."),
    slider(core_knobs.W_MAX, info="At most w_max tokens are drafted before the target verifies them."),
    slider(core_knobs.MIN_EXIT, info=f"No exit check below this layer ({OURS}: the paper checks from layer 1)."),
    slider(core_knobs.EXIT_VOCAB, info="Checks score only the V_exit most frequent tokens and renormalise over them "
                                       f"({OURS}: 0 = the whole vocabulary, as the paper); the output is unchanged."),
]

SAMPLING_KNOBS = [slider(core_knobs.TEMPERATURE), slider(core_knobs.SEED), slider(core_knobs.MAX_NEW)]

PRESET_NAMES = {"paper": "paper defaults", "embedded": "best measured, embedded pair",
                "auto": "auto: N chosen per step for this machine, T_shape fitted to the drafter"}
SPECBOUND_PRESET_NAMES = {
    "paper": "paper: checks at every layer from the first, whole vocabulary",
    "fast": f"fast: the exit layers stored with the heads, V_exit = 1024, ℓ_min = 2 ({OURS})",
}


def preset_label(name: str) -> str:
    """A tree preset's menu label from its knobs (a preset core/ adds later is listed under its own name)."""
    knobs = core_knobs.PRESETS[name]
    n = f"N≤{knobs['N']}" if knobs.get("auto") else f"N={knobs['N']}"  # under auto, N is only the cap
    return (f"{PRESET_NAMES.get(name, name)} ({n}, K={knobs['K']}, μ={knobs['mu']}, k={knobs['k_init']}, "
            f"T={knobs['shape_temperature']:g})")


# The same presets as the CLI's --preset (core/knobs.py), labelled for the dropdowns: the tree ones for the
# TALON view, paper and fast for the SpecBound view.
PRESETS = {preset_label(name): core_knobs.PRESETS[name] for name in core_knobs.presets_for("talon")}
SPECBOUND_PRESETS = {SPECBOUND_PRESET_NAMES.get(name, name): core_knobs.PRESETS[name]
                     for name in core_knobs.presets_for("specbound")}


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


def apply_preset(name: str) -> list:
    """The TALON knob values of a preset, in TALON_KNOBS order, then whether N is chosen per step (auto)."""
    return [PRESETS[name][k.name] for k in TALON_KNOBS] + [bool(PRESETS[name].get("auto"))]


def apply_specbound_preset(label: str) -> list:
    """The SpecBound knob values of a preset (by its menu label), in SPECBOUND_KNOBS order, then its exit
    layers."""
    name = next(n for n in core_knobs.presets_for("specbound") if SPECBOUND_PRESET_NAMES.get(n, n) == label)
    knobs = core_knobs.resolve("specbound", {"preset": name})
    return [knobs[k.name] for k in SPECBOUND_KNOBS] + [knobs["exit_layers"]]
