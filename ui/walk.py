""""Walk me through this step" on the page: the button and a line beside it (an invitation on the preview, then
"your run · step k"), the panel it opens (the stage's sentence, its picture, Back / Next / Close) and the
handlers. They only read stored traces, never the engine: the stages are built and drawn by viz/walk*.py from
the step shown (live, replayed, imported, or the start-up preview), its static shadow included.

Keys (assets/app.js): while the walk is open ← / → go back / on and Esc closes it; closed, ← / → replay steps
as before."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ui.handlers import friendly
from ui.limits import state_ttl_s
from ui.models import model_label
from ui.preview import PREVIEW
from ui.run import forget
from ui.views import clamp
from viz.escape import esc, num
from viz.walk_view import walk_view

BUTTON = "Walk me through this step"
INVITE = {
    "talon": "This is a preview on {model}, computed when the server started: step 1 of the example prompt at the "
             "default knobs. “Walk me through this step” shows how its tree was built, stage by stage: the root's "
             "Top-K, each level's gate, the budget, the one verification pass, the walk down, the bonus token. Step "
             "starts your own run.",
    "specbound": "This is a preview on {model}, computed when the server started: step 1 of the example prompt at "
                 "the default knobs. “Walk me through this step” follows each drafted token through the layers and "
                 "its exit checks, then the one verification. Step starts your own run.",
}
# before the start-up step is ready, or when it could not be computed: no preview is claimed
NO_STEP = ("Press Step to start a run; “Walk me through this step” then shows how the step shown was built, "
           "stage by stage.")


@dataclass(frozen=True)
class WalkAt:
    """Where an open walk stands: the step (trace index) and the stage shown."""
    step: int
    stage: int

    def forget(self) -> None:
        """Nothing to free when the page's state expires: a position, no engine session."""


def walk_block(view: str) -> dict:
    """The button row and the (hidden) walk panel, built where the page wants them; wired by `wire_walk`."""
    with gr.Row(equal_height=True, elem_classes="ss-walk-bar"):
        button = gr.Button(BUTTON, elem_id=f"{view}-walk", size="sm", min_width=200, scale=0,
                           elem_classes="ss-invite")
        note = gr.HTML(invite_html(view), elem_id=f"{view}-walk-note", min_height=0)
    with gr.Row(visible=False, equal_height=False, elem_id=f"{view}-walk-panel", elem_classes="ss-walk") as panel:
        with gr.Column(scale=2, min_width=300):  # the sentence beside its picture, so both fit one screen
            text = gr.HTML(elem_id=f"{view}-walk-text", min_height=0)
            with gr.Row():
                back = gr.Button("← Back", elem_id=f"{view}-walk-back", size="sm", min_width=80)
                forward = gr.Button("Next →", elem_id=f"{view}-walk-next", size="sm", variant="primary", min_width=80)
                close = gr.Button("Close (Esc)", elem_id=f"{view}-walk-close", size="sm", min_width=80)
        figure = gr.Plot(show_label=False, elem_id=f"{view}-walk-fig", scale=3, min_width=360)
    return dict(walk=button, walk_note=note, walk_panel=panel, walk_text=text, walk_fig=figure, walk_back=back,
                walk_next=forward, walk_close=close,
                walk_at=gr.State(None, time_to_live=state_ttl_s(), delete_callback=forget))


DRAWING = ("show_pruned", "annealed")


def invite_html(view: str) -> str:
    """The line beside the button before the visitor's own step: the start-up preview's invitation, naming the
    model it ran on, only when that step exists (a page load draws it: ui/open_link.py); otherwise, before it is
    ready or when it failed, no preview is announced."""
    preview = PREVIEW.runs.get(view)
    if preview is None or not preview.traces:
        return note_html("none", esc(NO_STEP))
    return note_html("preview", esc(INVITE[view].format(model=model_label(preview.config.target))))


def note_html(kind: str, html: str) -> str:
    """The line beside the button; `html` is already escaped."""
    return f'<div class="ss-walk-note ss-walk-{esc(kind)}" role="status">{html}</div>'


def shown_run(view: str, run):
    """The run whose steps the page shows: the visitor's (live or imported), else the start-up preview."""
    if run is not None and run.traces:
        return run, False
    preview = PREVIEW.runs.get(view)
    return (preview, True) if preview is not None and preview.traces else (None, False)


def heading(run, index: int, preview: bool) -> str:
    if preview:
        return "Preview · step 1"
    label = "Imported trace" if getattr(run, "label", "") else "Your run"
    return f"{label} · step {index + 1} of {len(run.traces)}"


def render(view: str, run, index: int | None, stage: int, options: dict) -> dict:
    """The walk panel open on `stage` of step `index` (None: the step the page shows now)."""
    source, preview = shown_run(view, run)
    if source is None:
        return dict(walk_panel=gr.Row(visible=True), walk_at=None, walk_fig=None,
                    walk_text=note_html("none", esc("No step to walk through yet: press Step first.")))
    index = clamp(source, index)
    drawing = {k: v for k, v in options.items() if k in DRAWING}  # the view's options a walk picture takes
    html, fig, at = walk_view(source.traces[index], source.shadows.get(index), stage,
                              heading(source, index, preview), **drawing)
    return dict(walk_panel=gr.Row(visible=True), walk_text=html, walk_fig=fig, walk_at=WalkAt(index, at))


def open_walk(view: str, run=None, replay=None, **options) -> dict:
    """The walk opens on stage 1 of the step shown (the replay slider's)."""
    return render(view, run, None if replay is None else int(replay) - 1, 0, options)


def move_walk(view: str, delta: int, run=None, walk_at: WalkAt | None = None, **options) -> dict:
    """Back (-1) or Next (+1): stages past either end stay at the end."""
    if not isinstance(walk_at, WalkAt):
        return open_walk(view, run, None, **options)
    return render(view, run, walk_at.step, walk_at.stage + delta, options)


def close_walk() -> dict:
    return dict(walk_panel=gr.Row(visible=False), walk_at=None)


def position(run, trace: dict | None) -> int | None:
    """Which of the run's steps the trace panel shows (its record's own index), None: the latest."""
    index = trace.get("index") if isinstance(trace, dict) else None
    return next((i for i, t in enumerate(run.traces) if t.index == index), None)


def follow(view: str, run=None, trace: dict | None = None, walk_at: WalkAt | None = None, **options) -> dict:
    """The page shows another step (a Step, a replay, an import; its trace panel changed): the line beside the
    button says whose step it is, and an open walk starts over on the new step."""
    source, preview = shown_run(view, run)
    out: dict = {"walk": gr.Button(elem_classes=["ss-invite"] if preview or source is None else [])}
    if preview or source is None:
        out["walk_note"] = invite_html(view)
    else:
        index = clamp(source, position(source, trace))
        kind = "imported" if getattr(source, "label", "") else "yours"
        out["walk_note"] = note_html(kind, f'<span class="ss-walk-badge">{esc(heading(source, index, False))}'
                                           f'</span> τ = {num(source.traces[index].tau, "d")}: walk through it to '
                                           f'see how it was built.')
    if isinstance(walk_at, WalkAt):
        out.update(render(view, run, None if source is None or preview else index, 0, options))
    return out


OUTPUTS = ("walk_panel", "walk_text", "walk_fig", "walk_at")


def wire_walk(spec, c: dict) -> None:
    """Button, Back / Next / Close, and following the step shown (the trace panel changes with every Step,
    replay and import). Handlers get and return values by name; a name left out stays as it is."""
    options = tuple(spec.options)

    def wire(event, fn, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> None:
        @friendly
        def call(*values):
            update = fn(**dict(zip(inputs, values)))
            return tuple(update.get(n, gr.skip()) for n in outputs)
        call.__name__ = getattr(fn, "__name__", "walk")
        event(call, [c[n] for n in inputs], [c[n] for n in outputs], api_visibility="private", show_progress="hidden")

    view = spec.name
    wire(c["walk"].click, lambda **v: open_walk(view, **v), ("run", "replay", *options), OUTPUTS)
    wire(c["walk_back"].click, lambda **v: move_walk(view, -1, **v), ("run", "walk_at", *options), OUTPUTS)
    wire(c["walk_next"].click, lambda **v: move_walk(view, 1, **v), ("run", "walk_at", *options), OUTPUTS)
    wire(c["walk_close"].click, lambda **v: close_walk(), (), ("walk_panel", "walk_at"))
    wire(c["trace"].change, lambda **v: follow(view, **v), ("run", "trace", "walk_at", *options),
         ("walk", "walk_note", *OUTPUTS))
