"""A shared link opens on its own settings, at its own step: when the page loads, a view the link gives settings
for is stepped with them (to the link's `step`, when it names that view) instead of showing the start-up
preview of other settings under the link's knobs; the visitor's next Step continues that run. Copy link adds
the step shown (from step 2 on) to the settings ui/share.py writes.

Why here: ui/share.py reads and writes the settings; this module only adds `step` and the page-load run. The
engine is reached the usual way (handlers.step → Run.step → ui/worker.py), at most MAX_STEPS steps."""
from __future__ import annotations

from typing import Mapping

import gradio as gr

from ui import handlers as h
from ui.examples import default_prompt
from ui.knobs import SAMPLING_KNOBS
from ui.models import DEFAULT_DRAFTER, default_model
from ui.run import Run
from ui.share import DEFAULT_LAYERS, FIELDS, fill, read_query, share_query
from ui.view_specs import ViewSpec
from ui.walk import invite_html

STEP = "step"
MAX_STEPS = 32  # steps a link may ask the page to run while it loads


def read_step(params: Mapping[str, str]) -> tuple[int | None, str]:
    """The link's step (1-based, clamped to 1..MAX_STEPS) and a line when it had to be changed or ignored."""
    raw = params.get(STEP)
    if raw is None:
        return None, ""
    try:
        value = int(str(raw).strip())
    except ValueError:
        return None, f"step={str(raw)[:40]!r} is not a step number (1–{MAX_STEPS}): ignored"
    used = min(max(value, 1), MAX_STEPS)
    note = "" if used == value else f"step must be between 1 and {MAX_STEPS}: {value} is used as {used}"
    return used, note


def link_values(view: str, params: Mapping[str, str]) -> dict:
    """What the link sets for `view`'s fields (ui/share.py's reading and rules), {} when nothing."""
    s = read_query({k: v for k, v in params.items() if k != STEP})
    return {n: v for n, v in zip(FIELDS[view], fill(view, s)) if v != gr.skip()}


def page_values(spec: ViewSpec, given: dict) -> dict:
    """Every value a Step of `spec` reads, as the page holds them after the link filled its fields."""
    values = {k.name: k.default for k in (*spec.knobs, *SAMPLING_KNOBS)}
    values.update(prompt=default_prompt(), target=default_model(), draft="embedded", drafter=DEFAULT_DRAFTER, auto=False,
                  chat="auto", exit_layers=DEFAULT_LAYERS)
    return {**values, **given}


def query_of(request: gr.Request | None) -> dict:
    try:
        return dict(request.query_params) if request is not None else {}
    except AttributeError:  # called without a page request (tests, the API)
        return {}


def open_view(spec: ViewSpec, request: gr.Request | None = None, **options) -> dict:
    """Page load: the link's own run of this view, stepped to its step, or else the start-up preview."""
    params = query_of(request)
    given = link_values(spec.name, params)
    step, note = read_step(params)
    named = params.get("tab", "talon") == spec.name and step is not None
    if not given and not named:
        return preview_view(spec, options)
    if note and named:
        gr.Warning(note)
    try:
        return h.step(spec, step if named else 1, **page_values(spec, {**given, **options}), run=None)
    except gr.Error as exc:  # the link's settings cannot run (a prompt too long, say): one line, and the preview
        gr.Warning(f"The shared link's settings could not be run: {exc.message}")
        return preview_view(spec, options)


def preview_view(spec: ViewSpec, options: dict) -> dict:
    """The start-up preview (waited for), and the walk's line beside it: the preview's invitation only when the
    preview exists."""
    return {**h.load(spec, **options), "walk_note": invite_html(spec.name)}


def share_link(view: str, values: dict) -> str:
    """Copy link: the settings (ui/share.py), and the step shown when it is step 2 or later of a live run."""
    query = share_query(view, values)
    run, replay = values.get("run"), values.get("replay")
    if isinstance(run, Run) and len(run.traces) > 1 and isinstance(replay, (int, float)) and int(replay) > 1:
        query += f"&{STEP}={min(int(replay), len(run.traces), MAX_STEPS)}"
    return query


def wire_open(demo: gr.Blocks, spec: ViewSpec, c: dict, **engine) -> None:
    """On page load: `open_view` (the link's run or the preview, waited for outside the engine's queue slots,
    as the preview always was), then for a link's run its slower panels (`engine`: their queue settings)."""
    options = tuple(spec.options)
    outputs = (*spec.outputs, "walk_note")  # the walk's line: the preview's invitation once it is drawn

    def load(request: gr.Request, *values):
        update = open_view(spec, request, **dict(zip(options, values)))
        return tuple(update.get(n, gr.skip()) for n in outputs)

    def extras(run, *values):
        if not isinstance(run, Run) or not run.traces:  # the preview: nothing more to draw
            return tuple(gr.skip() for _ in spec.extras)
        update = h.extras(spec, run=run, **dict(zip(spec.extras_inputs, values)))
        return tuple(update.get(n, gr.skip()) for n in spec.extras)

    load.__name__, extras.__name__ = f"{spec.name}_open", f"{spec.name}_open_extras"
    demo.load(load, [c[n] for n in options], [c[n] for n in outputs], api_visibility="private",
              show_progress="hidden", concurrency_limit=None).then(
        extras, [c["run"], *(c[n] for n in spec.extras_inputs)], [c[n] for n in spec.extras],
        api_visibility="private", show_progress="hidden", **engine)
