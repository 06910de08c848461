"""The stepping views, each declared once: its panels (what it draws), its controls, the renderer that fills
the panels for a step, and the order of its API inputs. app.py builds every stepping tab from one of these
with one builder, and ui/handlers.py steps, replays, resets, previews and imports any of them by name.

Adding a view is one spec and one renderer; adding a panel to a view is one `Panel` and a key in its
renderer's result (the TALON view's acceptance-by-depth bars were added that way)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import gradio as gr

from ui import learn
from ui.knobs import (OURS, PRESETS, SPECBOUND_KNOBS, SPECBOUND_PRESETS, TALON_KNOBS, Knob, apply_preset,
                      apply_specbound_preset)
from core.drafter_registry import REGISTRY, offered_drafters
from core.knobs import DRAFTER_KNOBS, LOOKUP_MIX, MU_SCHEDULE, SELF_LAYER
from core.trees.mu_schedule import ADAPTIVE, FIXED, AdaptiveMu
from ui.models import DEFAULT_DRAFTER
from ui.views import exit_panels, tree_panels

OUTCOMES = ("text", "timeline", "scatter", "stats")
CAPTIONS = {  # one plain line under each figure: what it shows, and how to read it
    "tree": "This step's draft tree, the root on top and depth d = 0, 1, … below it; a node's size is its path score "
            "p(u). Blue ● accepted by the target, vermillion ✕ rejected, grey ○ never reached, ★ the target's own "
            "bonus token.",
    "static": "The static EAGLE-style tree drafted and verified from the same prefix with the same budget N: it "
              "always grows D levels of K, whatever the context.",
    "levels": "Per depth d: how many candidates were scored, TALON's anchor m_d and gate μ·m_d, what each rule cut "
              "and the budget left (hover a column for its meaning).",
    "acceptance": "Of the steps whose tree reached depth d, the share whose accepted path got through it, beside "
                  "the drafter's own estimate Σp(u): where they part, the drafter is over- or under-confident.",
    "heatmap": "Each drafted token's confidence at each layer (faint where no check ran); outlined: the first "
               "layer at or above τ_exit, where it exited.",
    "bars": "How many layers each drafted token ran before exiting (d_max bounds it; w_max bounds how many tokens).",
    "timeline": "τ (tokens committed) and δ (draft forwards) at every step of the run.",
    "scatter": "Each step's (δ, τ) against the Oracle line τ = δ: above the line every draft forward paid for "
               "itself — above is good.",
}  # under every stepping view (ui/views.py outcome_panels)
SAMPLING = ("temperature", "seed", "max_new_tokens")


@dataclass(frozen=True)
class Panel:
    """One output component of a view; panels with the same `row` sit side by side. `caption`: one line under
    it saying, in plain words, what it shows."""
    name: str
    make: Callable[[], gr.Component]  # builds the component (its elem_id fixed by the spec)
    row: int = 0
    caption: str = ""


@dataclass(frozen=True)
class Control:
    """A non-slider input of a view (drafter, toggles, text fields), placed among the knobs."""
    name: str
    make: Callable[[], gr.Component]
    redraws: bool = False  # only changes how a stored step is drawn: a change replays, never steps


@dataclass(frozen=True)
class ViewSpec:
    name: str  # tab id, method name and API prefix
    title: str
    panels: tuple[Panel, ...]
    render: Callable[..., dict[str, Any]]  # (run, index, **redraw options) -> {panel name: value}
    knobs: tuple[Knob, ...]  # the method's sliders
    controls: tuple[Control, ...]
    api_inputs: tuple[str, ...]  # step's inputs after run, prompt, knobs and sampling, in API order
    config: Callable[[dict], tuple[str | None, str, dict]]  # named values -> (drafter, draft, extra knobs)
    learn: tuple[str, ...]
    extras: tuple[str, ...] = ()  # panels redrawn after each step, off the Step path (handlers.extras)
    extras_inputs: tuple[str, ...] = ()
    before_extras: Callable[[Any, int, dict], None] | None = None  # (run, index, named values): slow work
    wire: Callable[[dict], None] | None = None  # anything else this view wires (named components)

    @property
    def panel_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.panels)

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.controls if c.redraws)

    @property
    def step_inputs(self) -> tuple[str, ...]:
        return ("run", "prompt", *(k.name for k in self.knobs), *SAMPLING, *self.api_inputs)

    @property
    def outputs(self) -> tuple[str, ...]:
        """What stepping, replaying and resetting fill: the run, the panels, the outcomes, replay, trace."""
        return ("run", *self.panel_names, *OUTCOMES, "replay", "trace")


def plot(elem_id: str) -> gr.Plot:
    return gr.Plot(show_label=False, elem_id=elem_id, min_width=300)


def html(elem_id: str) -> gr.HTML:
    return gr.HTML(elem_id=elem_id, min_height=0)


def scroll(elem_id: str) -> gr.HTML:
    return gr.HTML(elem_id=elem_id, elem_classes="ss-scroll")


def drafter_choices() -> list[tuple[str, str]]:
    """The drafter radio: every drafter this build offers, labelled as declared (core/drafter_registry.py)."""
    return [(REGISTRY[name].label, name) for name in offered_drafters()]


def drafter_input(elem_id: str) -> gr.Radio:
    """Who proposes the draft tree; changing it starts a fresh run like any knob."""
    return gr.Radio(drafter_choices(), value=DEFAULT_DRAFTER, label="drafter", elem_id=elem_id,
                    info="where q comes from; the static tree beside it uses the same drafter")


def talon_config(v: dict) -> tuple[str | None, str, dict]:
    """The drafter, its weights, and the knobs that are not sliders: auto, and the drafter's own (ℓ_self)."""
    drafter = v.get("drafter") or DEFAULT_DRAFTER
    extra = {"auto": 1} if v.get("auto") else {}
    if v.get("mu_schedule") not in (None, FIXED):
        extra["mu_schedule"] = v["mu_schedule"]  # checked by the method when the run starts
    for k in DRAFTER_KNOBS.get(drafter, ()):  # checked against the target when the drafter is built
        extra[k.name] = k.default if v.get(k.name) is None else v[k.name]
    return drafter, v.get("draft") or "embedded", extra


def self_layer_input() -> gr.Number:
    """ℓ_self: a number, not a slider, since its range is the target's own (1 … L − 1); checked when the run starts."""
    k = SELF_LAYER
    return gr.Number(k.default, label=k.page_text, info=f"drafter self only: {k.info}", elem_id="talon-self-layer",
                     min_width=160)


def lookup_mix_input() -> gr.Slider:
    """λ_lookup: prompt lookup's share of a model drafter's q where the path repeats the text (0 = off)."""
    k = LOOKUP_MIX
    return gr.Slider(k.minimum, k.maximum, value=k.default, step=k.step, label=k.page_text,
                     info=f"drafters eagle3, model and self: {k.info}", elem_id="talon-lookup-mix", min_width=160)


def specbound_config(v: dict) -> tuple[str | None, str, dict]:
    layers = (v.get("exit_layers") or "").strip()
    return None, "embedded", {"exit_layers": layers} if layers else {}


def wire_specbound_preset(c: dict) -> None:
    """The preset menu sets the SpecBound sliders and the exit layers: paper and fast are one click apart."""
    c["preset"].change(apply_specbound_preset, [c["preset"]], [c[k.name] for k in SPECBOUND_KNOBS] + [c["exit_layers"]],
                       api_visibility="private")


def draw_static(run, index: int, values: dict) -> None:
    """TALON's slow extra: the static tree from the same prefix, unless the visitor turned it off."""
    if values.get("with_static", True):
        run.shadow(index, dict(run.config.knobs))


def wire_preset(c: dict) -> None:
    """The preset menu sets the TALON sliders and auto."""
    c["preset"].change(apply_preset, [c["preset"]], [c[k.name] for k in TALON_KNOBS] + [c["auto"]],
                       api_visibility="private")


TALON = ViewSpec(
    name="talon", title="TALON",
    panels=(Panel("tree", lambda: plot("talon-tree"), 0, CAPTIONS["tree"]),
            Panel("static", lambda: plot("static-tree"), 0, CAPTIONS["static"]),
            Panel("budget", lambda: html("talon-budget"), 1), Panel("compat", lambda: html("talon-compat"), 1),
            Panel("levels", lambda: scroll("talon-levels"), 2, CAPTIONS["levels"]),
            Panel("acceptance", lambda: plot("talon-acceptance"), 3, CAPTIONS["acceptance"])),
    render=tree_panels, knobs=tuple(TALON_KNOBS),
    controls=(
        Control("preset", lambda: gr.Dropdown(list(PRESETS), value=list(PRESETS)[0], label="preset", min_width=260)),
        Control("drafter", lambda: drafter_input("talon-drafter")),
        Control("show_pruned", lambda: gr.Checkbox(True, label="show pruned candidates (faint)"), redraws=True),
        Control("with_static", lambda: gr.Checkbox(True, label="draft the static tree beside it (same prefix, same N)"),
                redraws=True),
        Control("auto", lambda: gr.Checkbox(False, label="auto: choose N per step for this machine (N above is "
                                                         "the cap) and fit T_shape to the drafter", elem_id="talon-auto")),
        Control("self_layer", self_layer_input),
        Control("lookup_mix", lookup_mix_input),
        Control("mu_schedule", lambda: gr.Radio([("fixed", FIXED), ("adaptive", ADAPTIVE)], value=FIXED,
                                                label=MU_SCHEDULE.label, info=f"adaptive: {AdaptiveMu().rule} ({OURS})",
                                                elem_id="talon-mu-schedule")),
    ),
    api_inputs=("target", "draft", "show_pruned", "drafter", "auto", "chat", "self_layer", "mu_schedule",
                "lookup_mix"),
    config=talon_config,
    learn=("Learn: steps, trees, the gate, drafters and hardware",
           learn.STEP, learn.TREE, learn.GATE, learn.FEATURES, learn.HARDWARE, learn.KEYS),
    extras=("static", "scatter", "stats"), extras_inputs=("show_pruned", "with_static"), before_extras=draw_static,
    wire=wire_preset,
)

SPECBOUND = ViewSpec(
    name="specbound", title="SpecBound",
    panels=(Panel("heatmap", lambda: gr.Plot(show_label=False, elem_id="specbound-heatmap"), 0, CAPTIONS["heatmap"]),
            Panel("bars", lambda: plot("specbound-bars"), 1, CAPTIONS["bars"]),
            Panel("why", lambda: html("specbound-why"), 1)),
    render=exit_panels, knobs=tuple(SPECBOUND_KNOBS),
    controls=(
        Control("preset", lambda: gr.Dropdown(list(SPECBOUND_PRESETS), value=list(SPECBOUND_PRESETS)[0],
                                              label="preset", min_width=260, elem_id="specbound-preset")),
        Control("exit_layers", lambda: gr.Textbox("all", label="exit layers", placeholder="all",
                                                  info="checks below d_max (d_max is always checked): all = every "
                                                       f"layer from ℓ_min (the paper); stored = the set measured "
                                                       f"fastest with the heads, or e.g. 2,4 ({OURS})",
                                                  elem_id="specbound-exit-layers")),
        Control("annealed", lambda: gr.Radio([("annealed", True), ("raw", False)], value=True,
                                             label="confidence shown"), redraws=True),
    ),
    api_inputs=("target", "annealed", "exit_layers", "chat"), config=specbound_config,
    learn=("Learn: ACT and BSCS", learn.STEP, learn.ACT, learn.BSCS, learn.KEYS),
    extras=("stats",), wire=wire_specbound_preset,
)

VIEWS: dict[str, ViewSpec] = {v.name: v for v in (TALON, SPECBOUND)}
