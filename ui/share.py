"""A shareable link: the prompt and knobs of a stepping view as short query parameters, and back.

Why here and not in the page: the link is read on the server when the page loads (`request.query_params`),
checked against the same knob declarations the sliders use (ui/knobs.py), and anything unknown or out of
range is ignored or clamped with a line that names the range, never silently. Only values that differ
from the defaults go into the link, so it stays readable."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from viz.escape import esc
from typing import Mapping
from urllib.parse import quote, urlencode

import gradio as gr

from core.knobs import ALL_KNOBS
from ui.examples import default_prompt
from ui.knobs import SAMPLING_KNOBS, SPECBOUND_KNOBS, TALON_KNOBS, Knob
from ui.models import DEFAULT_DRAFTER

TABS = ("talon", "specbound", "compare", "tune")
# query parameter -> knob name; the parameters are the paper's symbols where they are short
PARAMS = {"N": "N", "K": "K", "mu": "mu", "k": "k_init", "T": "shape_temperature", "alpha": "alpha", "tau": "tau_exit",
          "dmax": "d_max", "wmax": "w_max", "lmin": "min_exit_layer", "vexit": "exit_vocab", "temp": "temperature",
          "seed": "seed", "new": "max_new_tokens"}
NAMES = {knob: param for param, knob in PARAMS.items()}
KNOBS = {k.name: k for k in TALON_KNOBS + SPECBOUND_KNOBS + SAMPLING_KNOBS}
# the components a link fills, per stepping view, in this order (app.py wires the same order)
FIELDS = {
    "talon": ["prompt", *(k.name for k in TALON_KNOBS), *(k.name for k in SAMPLING_KNOBS), "drafter", "auto"],
    "specbound": ["prompt", *(k.name for k in SPECBOUND_KNOBS), *(k.name for k in SAMPLING_KNOBS), "exit_layers"],
}
TEXT_PARAMS = {"p": "prompt", "drafter": "drafter", "auto": "auto", "layers": "exit_layers"}
LAYERS = re.compile(r"^\s*(all|stored|\d+(\s*,\s*\d+)*)\s*$")
DEFAULT_LAYERS = ALL_KNOBS["exit_layers"].default


def drafters() -> tuple[str, ...]:
    """The drafters the page offers (the EAGLE-3 head only when it ships)."""
    return ("eagle3", "model", "lookup") if DEFAULT_DRAFTER == "eagle3" else ("model", "lookup")


def fmt(v: float) -> str:
    return f"{v:g}"


def share_query(method: str, values: dict) -> str:
    """'?tab=talon&N=16&mu=0.05': the view and every value that differs from its default."""
    q: dict[str, str] = {"tab": method}
    prompt = values.get("prompt")
    if isinstance(prompt, str) and prompt.strip() and prompt != default_prompt():
        q["p"] = prompt
    for name in FIELDS[method]:
        v = values.get(name)
        if name in KNOBS and v is not None and float(v) != float(KNOBS[name].default):
            q[NAMES[name]] = fmt(float(v))
    if method == "talon":
        if values.get("drafter") and values["drafter"] != DEFAULT_DRAFTER:
            q["drafter"] = values["drafter"]
        if values.get("auto"):
            q["auto"] = "1"
    layers = (values.get("exit_layers") or "").replace(" ", "")
    if method == "specbound" and layers and layers != DEFAULT_LAYERS:
        q["layers"] = layers
    return "?" + urlencode(q, quote_via=quote, safe=",")


@dataclass
class Shared:
    """What a link asked for, after checking: the view, per-field values, and a line for each problem."""
    tab: str | None = None
    values: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def clamp_knob(k: Knob, raw: str, param: str, notes: list[str]) -> float | int | None:
    try:
        v = float(raw)
    except ValueError:
        notes.append(f"{param}={raw!r} is not a number ({k.label} takes {fmt(k.minimum)}–{fmt(k.maximum)}): ignored")
        return None
    if v != v:  # NaN
        notes.append(f"{param}={raw!r} is not a number: ignored")
        return None
    used = min(max(v, k.minimum), k.maximum)
    if used != v:
        notes.append(f"{k.label} must be between {fmt(k.minimum)} and {fmt(k.maximum)}: {raw} is used as {fmt(used)}")
    if k.integer and used != int(used):
        notes.append(f"{k.label} must be a whole number: {raw} is used as {round(used)}")
    return int(round(used)) if k.integer else used


def read_query(params: Mapping[str, str]) -> Shared:
    """Check a link's parameters; Gradio's own (`__theme`) pass through unremarked."""
    out = Shared()
    for param, raw in params.items():
        raw = str(raw)
        if param.startswith("__") or param == LINK_STEP:
            continue
        if param == "tab":
            if raw in TABS:
                out.tab = raw
            else:
                out.notes.append(f"tab={raw!r} is not a view ({', '.join(TABS)}): ignored")
        elif param in PARAMS:
            v = clamp_knob(KNOBS[PARAMS[param]], raw, param, out.notes)
            if v is not None:
                out.values[PARAMS[param]] = v
        elif param == "p":
            out.values["prompt"] = raw
        elif param == "drafter":
            if raw in drafters():
                out.values["drafter"] = raw
            else:
                out.notes.append(f"drafter={raw!r} is not one of {', '.join(drafters())}: ignored")
        elif param == "auto":
            out.values["auto"] = raw.lower() in ("1", "true", "yes", "on")
        elif param == "layers":
            if LAYERS.match(raw):
                out.values["exit_layers"] = raw.replace(" ", "")
            else:
                out.notes.append(f"layers={raw!r} is not all, stored or layer numbers such as 2,4: ignored")
        else:
            out.notes.append(f"unknown parameter {param!r}: ignored")
    return out


def link_message(s: Shared) -> str:
    if not s.values and not s.notes and s.tab is None:
        return ""
    said = ["the prompt" if n == "prompt" else
            f"{re.sub(r' *[(].*[)]', '', KNOBS[n].label) if n in KNOBS else n} = {fmt(v) if n in KNOBS else v}"
            for n, v in s.values.items()]
    head = "Opened a shared link" + (f": {', '.join(said)}." if said else ".")
    lines = [esc(head)] + [f'<span class="ss-link-note">{esc(n)}</span>' for n in s.notes]
    return '<div class="ss-link-msg" role="status">' + "<br>".join(lines) + "</div>"


def fill(tab: str, s: Shared) -> list:
    """One update per FIELDS[tab] component: the link's value, or left as it is. Sampling knobs and the
    prompt go to the view the link names (TALON when it names none)."""
    own = (s.tab or "talon") == tab
    shared = {"prompt", *(k.name for k in SAMPLING_KNOBS)}
    return [s.values[n] if n in s.values and (own or n not in shared) else gr.skip() for n in FIELDS[tab]]


def apply_link(request: gr.Request) -> tuple:
    """Page load: the tab, a message, then the TALON fields and the SpecBound fields from the URL."""
    try:
        params = dict(request.query_params)
    except AttributeError:  # called without a page request (tests, the API)
        params = {}
    s = read_query(params)
    tab = gr.Tabs(selected=s.tab) if s.tab else gr.skip()
    msg = link_message(s)
    shown = gr.HTML(value=msg, visible=True) if msg else gr.skip()  # hidden until a link has something to say
    return (tab, shown, *fill("talon", s), *fill("specbound", s))


# ---- walk (issue 29): a link may carry `step`, the step to open; ui/link_step.py reads it and runs to it ----
LINK_STEP = "step"
