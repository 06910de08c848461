"""The first thing a visitor sees: one real TALON step (with its static tree) and one real SpecBound step
on the example prompt at the page's default knobs, computed once in the background when the server
starts (it doubles as the warm-up, with auto's cost curves after it), drawn on page load and labelled as a
preview. Nothing is shared with
the visitor's own run: their first Step starts a run of their own from the prompt box."""
from __future__ import annotations

import logging
import threading

from ui.examples import default_prompt
from ui.knobs import SAMPLING_KNOBS, SPECBOUND_KNOBS, TALON_KNOBS, Knob
from ui.config import RunConfig
from ui.models import DEFAULT_DRAFTER, default_model, model_label
from ui.run import Run
from ui.worker import cost_curve
from ui.views import outcome_panels
from viz.html import message_html

log = logging.getLogger("specscope")
WAIT_S = 180.0  # how long a page load waits for the start-up step (models may still be loading)
LABEL = " · preview, computed at start-up"  # beside its figures' titles (Run.label): never the visitor's own
WATERMARK = "PREVIEW"
NOTE = ("Preview: step 1 of the example prompt on {model} at the default knobs, computed when the server "
        "started. “Walk me through this step” (above) shows how it was built, stage by stage; press Step to start "
        "your own run (the prompt and knobs above are yours).")


def default_config(method: str, knobs: list[Knob]) -> RunConfig:
    s = {k.name: k.default for k in SAMPLING_KNOBS}
    return RunConfig(method, default_prompt(), tuple((k.name, k.default) for k in knobs), s["temperature"],
                     int(s["seed"]), int(s["max_new_tokens"]), target=default_model())


class Preview:
    """Start-up runs, each stepped once; page loads wait on `ready`."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.ready = threading.Event()
        self.error = ""

    def compute(self) -> None:
        """Each view's start-up step on its own: one that fails is left out (the page then announces no preview
        for that view, ui/walk.invite_html) and never takes the other with it."""
        try:
            for method, knobs in (("talon", TALON_KNOBS), ("specbound", SPECBOUND_KNOBS)):
                try:
                    self.runs[method] = first_step(method, knobs)
                except Exception as exc:  # a preview must never stop the server; the log says what happened
                    log.exception("start-up preview of %s failed", method)
                    self.error = f"The start-up preview could not be computed ({type(exc).__name__}: {exc})."
        finally:
            self.ready.set()
        try:  # after the preview, which page loads wait for
            warm_cost_curves()
        except Exception:  # auto measures them when its first session is built instead
            log.exception("measuring the cost curves at start-up failed")

    def run(self, method: str) -> Run | None:
        self.ready.wait(WAIT_S)
        return self.runs.get(method)

    def note(self, run: Run) -> str:
        """The stats panel under a preview step: what it is and which model it ran on (a failure of the other
        view's preview is the server log's, never this view's)."""
        return message_html(NOTE.format(model=model_label(run.config.target)))


def warm_cost_curves() -> None:
    """auto's cost curves for the default drafter, measured at start-up (once per machine: they are kept on
    disk) with a line in the log, so a visitor's first auto step never waits for them."""
    cost_curve(default_model(), "embedded", DEFAULT_DRAFTER)


PREVIEW = Preview()


def first_step(method: str, knobs: list[Knob]) -> Run:
    """Step 1 of the example prompt at the default knobs (TALON's with its static tree), labelled as a preview;
    only its traces are kept."""
    run = Run.start(default_config(method, knobs))
    run.step()
    if method == "talon":
        run.shadow(0, dict(run.config.knobs))
    run.forget()
    run.label = LABEL
    return run


def preview_panels(method: str, render, **options) -> dict:
    """The start-up step of `method` drawn by its view's renderer, labelled as a preview (its titles, and a
    faint watermark on every figure, so the visitor's first Step, often the same step, visibly replaces it),
    with the outcomes."""
    run = PREVIEW.run(method)
    index = 0 if run else None
    out = {**render(run, index, **options), **outcome_panels(run, index)}
    if run is not None:
        for fig in out.values():
            if hasattr(fig, "add_annotation"):
                watermark(fig)
        out["stats"] = PREVIEW.note(run)
    return out


def watermark(fig) -> None:
    """A large, faint 'PREVIEW' across the figure (hover and clicks go through it)."""
    fig.add_annotation(text=WATERMARK, name="preview", x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       textangle=-18, font=dict(size=56, color="rgba(140,140,140,0.18)"), captureevents=False)
