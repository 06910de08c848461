"""The knobs the page shows: the declared knobs themselves (core/knobs.py holds each knob's range, default,
symbol, slider range, tooltip and link name), checked by their own Knob.check against the range a page
offers, so an out-of-range value becomes a message a visitor can act on."""
from __future__ import annotations

from core import knobs as core_knobs  # declared once: the page never disagrees with the CLI
from core.knobs import OURS, Knob  # noqa: F401 (the page's names for them)

TALON_KNOBS = core_knobs.page_knobs("talon")
SPECBOUND_KNOBS = core_knobs.page_knobs("specbound")
SAMPLING_KNOBS = core_knobs.page_sampling()
VIEW_KNOBS = {"talon": TALON_KNOBS, "specbound": SPECBOUND_KNOBS}


PRESET_NAMES = {"paper": "paper defaults", "embedded": "best measured, embedded pair",
                "auto": "auto: N chosen per step for this machine, T_shape fitted to the drafter"}
SPECBOUND_PRESET_NAMES = {
    "paper": "paper: checks at every layer from the first, the heads' whole vocabulary",
    "fast": f"fast: the exit layers stored with the heads, V_exit = 1024, ℓ_min = 2, τ_exit = 0.3, d_max = 4 ({OURS})",
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
    """Each value checked by its knob against the range the page offers; integers made ints."""
    return {k.name: k.check(values.get(k.name), page=True) for k in knobs}


def apply_preset(name: str) -> list:
    """The TALON knob values of a preset, in TALON_KNOBS order, then whether N is chosen per step (auto)."""
    return [PRESETS[name][k.name] for k in TALON_KNOBS] + [bool(PRESETS[name].get("auto"))]


def apply_specbound_preset(label: str) -> list:
    """The SpecBound knob values of a preset (by its menu label), in SPECBOUND_KNOBS order, then its exit
    layers."""
    name = next(n for n in core_knobs.presets_for("specbound") if SPECBOUND_PRESET_NAMES.get(n, n) == label)
    knobs = core_knobs.resolve("specbound", {"preset": name})
    return [knobs[k.name] for k in SPECBOUND_KNOBS] + [knobs["exit_layers"]]
