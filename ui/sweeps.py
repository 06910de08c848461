"""The Tune tab's sweeps, declared once: which method, which two knobs, their default values, and the knobs
held fixed, which the page shows and lets a visitor change.

Why these defaults: each grid sits around the method's defaults *and* the shape this machine favours
(docs/bench/, tree shape on a CPU): on a CPU a tree's verification costs about linearly in its size, so the
trees are swept at the `embedded` preset's K = 2, k = 1, T_shape = 0.5, where a small budget goes deep;
SpecBound at the `fast` preset, where ACT's α > 0 pays; the static tree at T_shape = 1, since a serving
engine ranks its tree at T = 1. A fixed knob the page does not show would make a grid answer a question
nobody asked (the paper's K = 10 spends a small N on one level)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from core import knobs as core_knobs
from core.knobs import Knob
from core.model.exit_heads import check_head_kind
from core.specbound.method import parse_exit_layers
from ui.knobs import validate

NOT_FIXED = ("auto", "mu_schedule")  # per-step choices (N, μ), not settings to hold: a sweep holds μ fixed


@dataclass(frozen=True)
class Sweep:
    method: str
    x: str  # the swept knobs' names
    y: str | None  # None: a one-knob sweep
    xs: str  # their default values, as the page's text boxes show them
    ys: str
    fixed: dict = field(default_factory=dict)  # every other knob of the method, as held during the sweep


def _fixed(method: str, preset: str | None, swept: tuple[str, ...], **over) -> dict:
    """The method's knobs at `preset` with `over` applied, less the swept ones and the per-step choices."""
    knobs = core_knobs.resolve(method, {"preset": preset, **over})
    return {k: v for k, v in knobs.items() if k not in swept and k not in NOT_FIXED}


SWEEPS = {
    "TALON: μ × N": Sweep("talon", "mu", "N", "0.03, 0.1, 0.2", "4, 8, 12, 16, 32, 60",
                          _fixed("talon", "embedded", ("mu", "N"))),
    "TALON: K × N": Sweep("talon", "K", "N", "2, 3, 4, 10", "8, 12, 32, 60", _fixed("talon", "embedded", ("K", "N"))),
    "SpecBound: α × τ_exit": Sweep("specbound", "alpha", "tau_exit", "0, 0.25, 0.5, 1", "0.1, 0.2, 0.3, 0.4",
                                   _fixed("specbound", "fast", ("alpha", "tau_exit"))),
    "SpecBound: d_max × w_max": Sweep("specbound", "d_max", "w_max", "2, 4, 6, 8", "2, 4, 8",
                                      _fixed("specbound", "fast", ("d_max", "w_max"))),
    "SpecBound: V_exit × ℓ_min (ours)": Sweep("specbound", "exit_vocab", "min_exit_layer", "0, 1024, 4096", "1, 2, 3",
                                              _fixed("specbound", "paper", ("exit_vocab", "min_exit_layer"))),
    "Static tree (SGLang's): D × K": Sweep("static", "depth", "K", "2, 4, 6, 8", "2, 4, 10",
                                           _fixed("static", "embedded", ("depth", "K"), shape_temperature=1.0)),
    "Chain (vLLM's): γ": Sweep("chain", "gamma", None, "1, 2, 3, 4, 6, 8", ""),
}


def knob_spec(name: str) -> Knob:
    """The declared knob (core/knobs.py): its page range checks what a visitor types into a sweep."""
    return core_knobs.ALL_KNOBS[name]


def symbol(name: str | None) -> str:
    """The knob's paper symbol (μ, N, α, τ_exit, d_max, w_max) for labels and axes ('' for a 1-D sweep's y)."""
    return word(core_knobs.ALL_KNOBS[name]) if name else ""


def word(k: core_knobs.Knob) -> str:
    """How the page writes a knob: its symbol ('T_shape'), or its whole label when it has none ('exit layers')."""
    return k.label.split(" (")[0]


def parse_values(text: str, name: str) -> list[float]:
    """'0.01, 0.03' -> validated values for knob `name`."""
    spec = knob_spec(name)
    parts = [p for p in str(text).replace(";", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError(f"give at least one value for {spec.label}")
    return [validate([spec], {name: p.strip()})[name] for p in parts]


def fixed_text(fixed: dict) -> str:
    """{'K': 2, 'shape_temperature': 0.5} -> 'K = 2, T_shape = 0.5' (what the page's box shows)."""
    def value(v) -> str:
        return ",".join(map(str, v)) if isinstance(v, (tuple, list)) else f"{v:g}" if isinstance(v, float) else str(v)
    return ", ".join(f"{word(core_knobs.ALL_KNOBS[k])} = {value(v)}" for k, v in fixed.items())


def _names(method: str) -> dict[str, str]:
    """Every way the page may write each of the method's knobs -> its name."""
    out = {}
    for k in core_knobs.METHOD_KNOBS[method]:
        out.update({k.name: k.name, word(k): k.name})
    return out


def parse_fixed(method: str, text: str, swept: tuple[str, ...]) -> dict:
    """'K = 2, T_shape = 0.5, exit layers = 2,4' -> checked values by knob name. A comma starts a new pair
    only before 'name ='. Swept knobs, other methods' knobs and per-step choices are refused by name."""
    names, out = _names(method), {}
    for pair in re.split(r"[,;]\s*(?=[^,;=]+=)", str(text or "").strip()):
        if not pair.strip():
            continue
        if "=" not in pair:
            raise ValueError(f"fixed knobs are 'name = value' pairs, e.g. 'K = 2, T_shape = 0.5' "
                             f"(got {pair.strip()!r})")
        key, value = (s.strip() for s in pair.split("=", 1))
        name = names.get(key)
        if name is None or name in NOT_FIXED:
            known = ", ".join(word(k) for k in core_knobs.METHOD_KNOBS[method] if k.name not in NOT_FIXED)
            raise ValueError(f"'{key}' is not a knob of {method} to hold fixed (its knobs: {known})")
        if name in swept:
            raise ValueError(f"{key} is swept: leave it out of the fixed knobs")
        out[name] = check_fixed(name, value)
    return out


def check_fixed(name: str, value: str):
    """One fixed value, checked with the page's ranges (a slider's, or the exit-layer syntax)."""
    if name == "exit_layers":
        parsed = parse_exit_layers(value)
        return parsed if isinstance(parsed, str) else ",".join(map(str, parsed))
    if name == "exit_heads":
        return check_head_kind(value)
    return validate([knob_spec(name)], {name: value})[name]
