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

from core.drafter_registry import offered_drafters
from core.knobs import ALL_KNOBS, Knob
from ui.examples import default_prompt
from ui.knobs import SAMPLING_KNOBS, VIEW_KNOBS
from ui.models import DEFAULT_DRAFTER
from ui.view_specs import VIEWS

TABS = (*VIEWS, "compare", "tune")
KNOBS = {k.name: k for ks in (*VIEW_KNOBS.values(), SAMPLING_KNOBS) for k in ks}
KNOBS |= {c.name: ALL_KNOBS[c.name] for v in VIEWS.values() for c in v.controls  # a knob drawn as a control (λ_lookup)
          if c.name in ALL_KNOBS and ALL_KNOBS[c.name].link}
PARAMS = {k.link: k.name for k in KNOBS.values() if k.link}  # query parameter -> knob (declared with the knob)
NAMES = {knob: param for param, knob in PARAMS.items()}
CONTROLS = {"drafter": "drafter", "auto": "auto", "layers": "exit_layers"}  # query parameter -> a view's control
LAYERS = re.compile(r"^\s*(all|stored|\d+(\s*,\s*\d+)*)\s*$")
DEFAULT_LAYERS = ALL_KNOBS["exit_layers"].default


def link_fields(view: str) -> list[str]:
    """The components a link fills in a stepping view, in this order (app.py wires the same order): the prompt,
    its knobs, the sampling knobs, then its controls that a link carries."""
    controls = [c.name for c in VIEWS[view].controls if c.name in CONTROLS.values() or c.name in KNOBS]
    return ["prompt", *(k.name for k in VIEW_KNOBS[view]), *(k.name for k in SAMPLING_KNOBS), *controls]


FIELDS = {view: link_fields(view) for view in VIEWS}


def drafters() -> tuple[str, ...]:
    """The drafters the page offers (core/drafter_registry.py's registry: the EAGLE-3 head only when it ships)."""
    return tuple(offered_drafters())


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
    fields = set(FIELDS[method])
    if "drafter" in fields and values.get("drafter") and values["drafter"] != DEFAULT_DRAFTER:
        q["drafter"] = values["drafter"]
    if "auto" in fields and values.get("auto"):
        q["auto"] = "1"
    layers = (values.get("exit_layers") or "").replace(" ", "")
    if "exit_layers" in fields and layers and layers != DEFAULT_LAYERS:
        q["layers"] = layers
    return "?" + urlencode(q, quote_via=quote, safe=",")


@dataclass
class Shared:
    """What a link asked for, after checking: the view, per-field values, and a line for each problem."""
    tab: str | None = None
    values: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def clamp_knob(k: Knob, raw: str, param: str, notes: list[str]) -> float | int | None:
    lo, hi = k.page_min, k.page_max
    try:
        v = float(raw)
    except ValueError:
        notes.append(f"{param}={raw!r} is not a number ({k.label} takes {fmt(lo)}–{fmt(hi)}): ignored")
        return None
    if v != v:  # NaN
        notes.append(f"{param}={raw!r} is not a number: ignored")
        return None
    used = min(max(v, lo), hi)
    if used != v:
        notes.append(f"{k.label} must be between {fmt(lo)} and {fmt(hi)}: {raw} is used as {fmt(used)}")
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
    prompt go to the view the link names (the first view when it names none)."""
    own = (s.tab or next(iter(VIEWS))) == tab
    shared = {"prompt", *(k.name for k in SAMPLING_KNOBS)}
    return [s.values[n] if n in s.values and (own or n not in shared) else gr.skip() for n in FIELDS[tab]]


def apply_link(request: gr.Request) -> tuple:
    """Page load: the tab, a message, then each stepping view's link fields (VIEWS order) from the URL."""
    try:
        params = dict(request.query_params)
    except AttributeError:  # called without a page request (tests, the API)
        params = {}
    s = read_query(params)
    tab = gr.Tabs(selected=s.tab) if s.tab else gr.skip()
    msg = link_message(s)
    shown = gr.HTML(value=msg, visible=True) if msg else gr.skip()  # hidden until a link has something to say
    return (tab, shown, *(update for view in VIEWS for update in fill(view, s)))


LINK_STEP = "step"  # a link may carry the step to open: ui/open_link.py reads it and runs to it
