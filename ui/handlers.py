"""Event handlers of the stepping views and the model box: plain module-level functions (tests call them
directly) that turn page inputs into runs and runs into view outputs. Bad input becomes gr.Error/gr.Warning; the
session's Run survives. The Compare and Tune tabs keep theirs beside their builders (ui/compare_tab.py,
ui/tune_tab.py)."""
from __future__ import annotations

import functools
import inspect
import logging
import time

import gradio as gr

from core.engine import SessionError
from ui.baseline import time_baseline
from ui.config import RunConfig
from ui.gpu import remote
from ui.importer import ImportedRun, import_trace
from ui.knobs import SAMPLING_KNOBS, validate
from core.model.real_models import REAL_MODELS
from ui.models import DEFAULT_DRAFTER, EMBEDDED, pair_of
from ui.preview import preview_panels
from ui.priority import interactive
from ui.redact import no_paths
from ui.run import Run
from ui.tempfiles import write_export
from ui.view_specs import SAMPLING, ViewSpec
from ui.views import clamp, outcome_panels, streamed_texts
from ui.worker import load_pair
from viz.escape import esc
from viz.html import stats_html

log = logging.getLogger("specscope")


def user_error(exc: Exception, name: str) -> gr.Error:
    """The one line a visitor sees for an exception, escaped (a toast renders HTML, and a message may quote a
    file's contents) and without any server path (ui/redact.py): expected problems keep their message and are
    logged as one line; others get a short message and their traceback goes to the server log."""
    if isinstance(exc, gr.Error):
        exc.message = no_paths(str(exc.message))
        return exc
    if isinstance(exc, ValueError):  # SessionError, knob, file and model problems: written for users
        log.info("%s: %s", name, one_line(str(exc)))
        return gr.Error(esc(no_paths(one_line(str(exc))), quote=False), print_exception=False)
    log.exception("handler %s failed", name)
    said = f"something went wrong ({type(exc).__name__}: {one_line(no_paths(str(exc)))}); your session is kept"
    return gr.Error(esc(said, quote=False), print_exception=False)


def one_line(text: str, most: int = 400) -> str:
    line = " ".join(text.split())
    return line if len(line) <= most else line[: most - 1] + "…"


def friendly(fn):
    """No traceback ever reaches the page: expected problems keep their message, others get a short one.
    Generator handlers (Compare, Tune) are wrapped as generators, so their errors are caught too.
    The visitor's error is raised after the handler's exception is gone: raised inside `except`, it would
    carry that exception as its context, and with it every frame's locals (a refused 20 MB import's parsed
    JSON, ~100 MB) for as long as Gradio keeps the error."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
                return
            except Exception as exc:
                err = bare(user_error(exc, fn.__name__))
            raise err
        return generator

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            err = bare(user_error(exc, fn.__name__))
        raise err
    return wrapper


def bare(err: gr.Error) -> gr.Error:
    """The error without what it was raised from or through (a handler's own gr.Error keeps both otherwise)."""
    err.__context__ = err.__cause__ = err.__traceback__ = None
    return err


def make_config(method: str, prompt: str, knobs: dict, knob_specs, sampling: dict, target: str,
                draft: str, drafter: str | None = None, extra: dict | None = None, chat: str | None = None) -> RunConfig:
    """`extra`: knobs that are not sliders (auto, exit layers), checked by the engine when the run starts;
    `chat`: the target's chat template around the prompt (auto | on | off)."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty: type some text or pick an example")
    k = {**validate(knob_specs, knobs), **(extra or {})}
    s = validate(SAMPLING_KNOBS, sampling)
    return RunConfig(method, prompt, tuple(k.items()), s["temperature"], s["seed"], s["max_new_tokens"],
                     target or "embedded", draft or "embedded", drafter or DEFAULT_DRAFTER, chat or "auto")


def advance(run: Run | None, cfg: RunConfig, n: int = 1) -> Run:
    """Step the session's run (up to `n` steps in one engine call), starting a fresh one when the prompt,
    knobs or model changed. An imported trace is only replayed: Step goes back to the live run it kept."""
    if isinstance(run, ImportedRun):
        run = run.live
    if run is not None and run.retired:
        run = None
    if run is None or run.config != cfg:
        if run is not None and run.traces:
            gr.Info("Settings changed: started a new run.")
        run = Run.start(cfg)
    if run.done:
        gr.Warning(f"Generation has finished ({run.stop_reason}). Press Reset or change the prompt.")
        return run
    run.step(n)
    return run


def slider(run: Run | None, index: int | None) -> dict:
    n = len(run.traces) if run is not None else 0
    return gr.Slider(minimum=1, maximum=max(2, n), value=(index or 0) + 1, step=1, interactive=n > 1)


def trace_json(run: Run | None, index: int | None) -> dict:
    return {} if index is None else run.traces[index].to_dict()


def view_outputs(spec: ViewSpec, run, index: int | None, options: dict) -> dict:
    """Everything a stepping view shows for step `index` of `run`, by component name."""
    return {"run": run, **spec.render(run, index, **options), **outcome_panels(run, index),
            "replay": slider(run, index), "trace": trace_json(run, index)}


def options_of(spec: ViewSpec, values: dict) -> dict:
    """The view's display options among the named values (a missing one keeps its renderer's default)."""
    return {name: values[name] for name in spec.options if name in values}


@interactive
@friendly
def step(spec: ViewSpec, n: int = 1, **values) -> dict:
    """One step of the view's method (Play: up to `n`, in one engine call), a new run when the prompt, knobs
    or model changed; the slower panels follow in `extras`. Values by name: run, prompt, the spec's knobs,
    sampling, and its inputs."""
    knobs = {k.name: values.get(k.name) for k in spec.knobs}
    sampling = {name: values.get(name) for name in SAMPLING}
    drafter, draft, extra = spec.config(values)
    cfg = make_config(spec.name, values.get("prompt"), knobs, spec.knobs, sampling, values.get("target"), draft,
                      drafter, extra or None, values.get("chat"))
    run = advance(values.get("run"), cfg, n)
    if run.retired:  # Reset was pressed while this step ran: Reset wins
        gr.Info("Reset while a step was running: that step was discarded.")
        return view_outputs(spec, None, None, options_of(spec, values))
    return view_outputs(spec, run, clamp(run, None), options_of(spec, values))


@interactive
@friendly
def extras(spec: ViewSpec, run=None, **values) -> dict:
    """Off the Step path: the view's own slower work (TALON: the static tree), then the AR baseline that
    the stats need; returns the spec's `extras` panels."""
    if isinstance(run, ImportedRun):  # a failed tick left the imported trace on show: nothing to add to it
        return {}
    index = clamp(run, None)
    if index is not None:
        if spec.before_extras is not None:
            spec.before_extras(run, index, values)
        time_baseline(run)
        run.fetch_cost()
    out = view_outputs(spec, run, index, options_of(spec, values))
    return {name: out[name] for name in spec.extras}


@friendly
def replay(spec: ViewSpec, run=None, replay=None, **values) -> dict:
    """Redraw step `replay` (1-based) from stored traces; nothing is recomputed."""
    index = clamp(run, None if replay is None else int(replay) - 1)
    out = view_outputs(spec, run, index, options_of(spec, values))
    del out["run"]
    return out


def reset(spec: ViewSpec, run=None, **values) -> dict:
    """Forget the run (a fresh one starts on the next Step) and stop playing. A step still running for it is
    discarded when it ends, so Reset is never silently undone by that step's result."""
    for r in (run, live(run)):
        if r is not None:
            r.retired = True
            r.forget()
    return {**view_outputs(spec, None, None, options_of(spec, values)), **STOP_PLAYING}


def load(spec: ViewSpec, **values) -> dict:
    """On page load: the start-up preview step, drawn without giving the visitor a run (state stays empty)."""
    return preview_panels(spec.name, spec.render, **options_of(spec, values))


@interactive
@friendly
def remeasure(run: Run | None) -> str:
    """Throw this prompt's AR timings away and time AR again over the run's positions (the machine's load
    may have changed); returns the redrawn stats panel."""
    if run is None or not run.traces:
        raise SessionError("nothing to compare yet: press Step first")
    if isinstance(run, ImportedRun):
        raise SessionError("an imported trace was timed elsewhere: press Step for a live run to measure here")
    time_baseline(run, fresh=True)
    return stats_html(run.stats())


PLAY, PAUSE = "▶ Play", "⏸ Pause"
STOP_PLAYING = {"timer": gr.Timer(active=False), "play": gr.Button(value=PLAY)}


def toggle_play(label: str, speed: float) -> tuple:
    """Play starts the timer (one step per tick); Pause stops it."""
    playing = label == PLAY
    return gr.Timer(value=float(speed), active=playing), gr.Button(value=PAUSE if playing else PLAY)


def set_speed(speed: float) -> dict:
    return gr.Timer(value=float(speed))


REVEAL_S = 0.5  # Play spends at most this long revealing one tick's tokens, one at a time
PLAY_STEPS = 4  # steps per Play tick when engine calls are remote (ZeroGPU): each call has a fixed overhead


def tick(spec: ViewSpec):
    """A timer tick steps like the Step button, then streams the step's committed tokens into the text one
    at a time; it stops playing when the run ends or fails. A generator of named updates: the first carries
    the new state, so the session is kept whatever happens to the later ones."""

    def on_tick(**values):
        run = values.get("run")
        before = len(run.traces) if run is not None else 0
        try:
            out = step(spec, PLAY_STEPS if remote() else 1, **values)
        except gr.Error as exc:
            gr.Warning(str(exc.message))
            yield dict(STOP_PLAYING)
            return
        new = out["run"]
        stepped = new is not None and (new is not run or len(new.traces) > before)
        frames = streamed_texts(new, len(new.traces) - (before if new is run else 0)) if stepped else []
        if frames:
            pause = REVEAL_S / (len(frames) + 1)
            yield {**out, "text": frames[0]}
            for html in frames[1:] + [out["text"]]:
                time.sleep(pause)
                yield {"text": html}
        else:
            yield out
        yield dict(STOP_PLAYING) if new is None or new.done else {}
    on_tick.__name__ = f"{spec.name}_tick"
    return on_tick


@friendly
def import_run(spec: ViewSpec, run=None, path: str | None = None, **values) -> dict:
    """Replay an exported trace of the view's method from step 1; a bad file is one line and the session
    stays as it was."""
    imported = import_trace(path, spec.name, live(run))
    try:
        return {**view_outputs(spec, imported, 0, options_of(spec, values)), **STOP_PLAYING}
    except Exception as exc:  # shaped like a trace, but its values cannot be drawn
        raise SessionError(f"the trace's steps could not be drawn ({type(exc).__name__}): is it an unedited export?")


def live(run: Run | ImportedRun | None) -> Run | None:
    """The visitor's live run, behind any imported trace shown now."""
    return run.live if isinstance(run, ImportedRun) else run


@friendly
def export_trace(run: Run | None) -> tuple:
    """The run's traces as a downloadable JSON file and as data (the API endpoint returns both)."""
    if run is None or not run.traces:
        raise SessionError("nothing to export yet: press Step first")
    data = run.export()
    return write_export(data), data


def choose_pair(target: str) -> tuple:
    """A pair from the model menu fills the target and draft boxes, the eagle3 drafter in every tab and chat
    auto; the embedded pair puts the embedded models back."""
    if target in REAL_MODELS:  # a real model fetched here: its own head, trained here, is the draft box's default
        return (target, EMBEDDED, "auto", *(["eagle3"] * 3))
    pair = pair_of(target)
    head = pair.head if pair is not None else EMBEDDED
    return (target if pair is not None else EMBEDDED, head, "auto", *([DEFAULT_DRAFTER if pair is None else "eagle3"] * 3))


@friendly
def load_models(target: str, draft: str) -> str:
    """Validate and load the chosen pair now, so the first Step does not pay for it."""
    return load_pair(target, draft)
