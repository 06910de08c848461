"""Event handlers: plain module-level functions (tests call them directly) that turn page inputs into
runs and runs into view outputs. Bad input becomes gr.Error/gr.Warning; the session's Run survives."""
from __future__ import annotations

import functools
import inspect
import logging
import time

import gradio as gr

from core.engine import SessionError
from ui.gpu import gpu
from ui.importer import ImportedRun, import_trace
from ui.knobs import PRESETS, SAMPLING_KNOBS, SPECBOUND_KNOBS, TALON_KNOBS, validate
from ui.models import DEFAULT_DRAFTER
from ui.run import Run, RunConfig
from ui.tempfiles import write_export
from ui.preview import specbound_preview, talon_preview
from ui.views import ExitView, TreeView, clamp, exit_view, streamed_texts, tree_view
from viz.html import stats_html

log = logging.getLogger("specscope")


def user_error(exc: Exception, name: str) -> gr.Error:
    """The one line a visitor sees for an exception: expected problems keep their message."""
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, ValueError):  # SessionError, knob and model problems: written for users
        return gr.Error(str(exc))
    log.exception("handler %s failed", name)
    return gr.Error(f"something went wrong ({type(exc).__name__}: {exc}); your session is kept")


def friendly(fn):
    """No traceback ever reaches the page: expected problems keep their message, others get a short one.
    Generator handlers (Compare, Tune) are wrapped as generators, so their errors are caught too."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:
                raise user_error(exc, fn.__name__) from None
        return generator

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise user_error(exc, fn.__name__) from None
    return wrapper


def make_config(method: str, prompt: str, knobs: dict, knob_specs, sampling: dict, target: str,
                draft: str, drafter: str | None = None, extra: dict | None = None) -> RunConfig:
    """`extra`: knobs that are not sliders (auto, exit layers), checked by the engine when the run starts."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty: type some text or pick an example")
    k = {**validate(knob_specs, knobs), **(extra or {})}
    s = validate(SAMPLING_KNOBS, sampling)
    return RunConfig(method, prompt, tuple(k.items()), s["temperature"], s["seed"], s["max_new_tokens"],
                     target or "embedded", draft or "embedded", drafter or DEFAULT_DRAFTER)


def advance(run: Run | None, cfg: RunConfig) -> Run:
    """Step the session's run, starting a fresh one when the prompt, knobs or model changed. An imported
    trace is only replayed: Step goes back to the live run it kept."""
    if isinstance(run, ImportedRun):
        run = run.live
    if run is None or run.config != cfg:
        if run is not None and run.traces:
            gr.Info("Settings changed: started a new run.")
        run = Run.start(cfg)
    if run.done:
        gr.Warning(f"Generation has finished ({run.session.stop_reason}). Press Reset or change the prompt.")
        return run
    run.step()
    return run


def slider(run: Run | None, index: int | None) -> dict:
    n = len(run.traces) if run is not None else 0
    return gr.Slider(minimum=1, maximum=max(2, n), value=(index or 0) + 1, step=1, interactive=n > 1)


def trace_json(run: Run | None, index: int | None) -> dict:
    return {} if index is None else run.traces[index].to_dict()


def tree_outputs(run: Run | None, view: TreeView, index: int | None) -> tuple:
    o = view.outcomes
    return (run, view.tree, view.static, view.budget, view.levels, o.text, o.timeline, o.scatter, o.stats,
            slider(run, index), trace_json(run, index))


def exit_outputs(run: Run | None, view: ExitView, index: int | None) -> tuple:
    o = view.outcomes
    return (run, view.heatmap, view.bars, view.why, o.text, o.timeline, o.scatter, o.stats,
            slider(run, index), trace_json(run, index))


@gpu
@friendly
def talon_step(run, prompt, N, K, mu, k_init, temperature, seed, max_new_tokens, target="embedded",
               draft="embedded", show_pruned=True, drafter=DEFAULT_DRAFTER, auto=False) -> tuple:
    """One TALON step (a new run when settings changed); the static tree and stats follow in talon_extras.
    `auto`: N is chosen per step for this machine, with the N knob as the cap."""
    cfg = make_config("talon", prompt, {"N": N, "K": K, "mu": mu, "k_init": k_init}, TALON_KNOBS,
                      {"temperature": temperature, "seed": seed, "max_new_tokens": max_new_tokens}, target, draft,
                      drafter, {"auto": 1} if auto else None)
    run = advance(run, cfg)
    index = clamp(run, None)
    return tree_outputs(run, tree_view(run, index, show_pruned), index)


@gpu
@friendly
def talon_extras(run: Run | None, show_pruned=True, with_static=True) -> tuple:
    """Off the Step path: the static tree from the latest step's prefix, and the AR baseline for the stats."""
    if isinstance(run, ImportedRun):  # a failed tick left the imported trace on show: nothing to add to it
        return gr.skip(), gr.skip(), gr.skip()
    index = clamp(run, None)
    if index is None:
        empty = tree_view(None, None)
        return empty.static, empty.outcomes.scatter, empty.outcomes.stats
    if with_static:
        run.shadow(index, dict(run.config.knobs))
    run.baseline()
    view = tree_view(run, index, show_pruned)
    return view.static, view.outcomes.scatter, view.outcomes.stats


@friendly
def talon_replay(run: Run | None, step: int, show_pruned=True) -> tuple:
    """Redraw step `step` (1-based) from stored traces; nothing is recomputed."""
    index = clamp(run, None if step is None else int(step) - 1)
    return tree_outputs(run, tree_view(run, index, show_pruned), index)[1:]


@gpu
@friendly
def specbound_step(run, prompt, alpha, tau_exit, d_max, w_max, temperature, seed, max_new_tokens,
                   target="embedded", annealed=True, exit_layers="") -> tuple:
    """`exit_layers`: e.g. "2,4", the only layers with an exit check; empty = every layer up to d_max."""
    layers = (exit_layers or "").strip()
    cfg = make_config("specbound", prompt, {"alpha": alpha, "tau_exit": tau_exit, "d_max": d_max, "w_max": w_max},
                      SPECBOUND_KNOBS, {"temperature": temperature, "seed": seed, "max_new_tokens": max_new_tokens},
                      target, "embedded", None, {"exit_layers": layers} if layers else None)
    run = advance(run, cfg)
    index = clamp(run, None)
    return exit_outputs(run, exit_view(run, index, annealed), index)


@gpu
@friendly
def specbound_extras(run: Run | None, annealed=True) -> str:
    """Off the Step path: the AR baseline, then the stats panel that needs it."""
    if isinstance(run, ImportedRun):
        return gr.skip()
    if clamp(run, None) is None:
        return exit_view(None, None).outcomes.stats
    run.baseline()
    return exit_view(run, None, annealed).outcomes.stats


@gpu
@friendly
def remeasure(run: Run | None) -> str:
    """Throw this prompt's AR timings away and time AR again over the run's positions (the machine's load
    may have changed); returns the redrawn stats panel."""
    if run is None or not run.traces:
        raise SessionError("nothing to compare yet: press Step first")
    if isinstance(run, ImportedRun):
        raise SessionError("an imported trace was timed elsewhere: press Step for a live run to measure here")
    run.baseline(fresh=True)
    return stats_html(run.stats())


@friendly
def specbound_replay(run: Run | None, step: int, annealed=True) -> tuple:
    index = clamp(run, None if step is None else int(step) - 1)
    return exit_outputs(run, exit_view(run, index, annealed), index)[1:]


def talon_load(show_pruned=True) -> tuple:
    """On page load: the start-up preview step, drawn without giving the visitor a run (state stays empty)."""
    return tree_outputs(None, talon_preview(show_pruned), None)[1:]


def specbound_load(annealed=True) -> tuple:
    return exit_outputs(None, specbound_preview(annealed), None)[1:]


def reset_tree(run: Run | None, show_pruned=True) -> tuple:
    """Forget the run (a fresh one starts on the next Step) and stop playing."""
    return tree_outputs(None, tree_view(None, None), None) + (gr.Timer(active=False), gr.Button(value=PLAY))


def reset_exit(run: Run | None, annealed=True) -> tuple:
    return exit_outputs(None, exit_view(None, None), None) + (gr.Timer(active=False), gr.Button(value=PLAY))


PLAY, PAUSE = "▶ Play", "⏸ Pause"
STOP_PLAYING = (gr.Timer(active=False), gr.Button(value=PLAY))  # for an import: it shows a replay, not a run


def toggle_play(label: str, speed: float) -> tuple:
    """Play starts the timer (one step per tick); Pause stops it."""
    playing = label == PLAY
    return gr.Timer(value=float(speed), active=playing), gr.Button(value=PAUSE if playing else PLAY)


def apply_preset(name: str) -> list:
    """The TALON knob values of a preset, in TALON_KNOBS order, then whether N is chosen per step (auto)."""
    return [PRESETS[name][k.name] for k in TALON_KNOBS] + [bool(PRESETS[name].get("auto"))]


def set_speed(speed: float) -> dict:
    return gr.Timer(value=float(speed))


REVEAL_S = 0.5  # Play spends at most this long revealing one step's tokens, one at a time


def tick(step_fn, outputs_len: int, text_at: int):
    """A timer tick steps like the Step button, then streams the step's committed tokens into the text
    (output `text_at`) one at a time; it stops playing when the run ends or fails. A generator: the first
    update carries the new state, so the session is kept whatever happens to the later ones."""
    stop = (gr.Timer(active=False), gr.Button(value=PLAY))

    def on_tick(run, *args):
        before = len(run.traces) if run is not None else 0
        try:
            out = step_fn(run, *args)
        except gr.Error as exc:
            gr.Warning(str(exc.message))
            yield (gr.skip(),) * outputs_len + stop
            return
        new = out[0]
        tail = stop if new is not None and new.done else (gr.skip(), gr.skip())
        stepped = new is not None and (new is not run or len(new.traces) > before)
        frames = streamed_texts(new) if stepped else []
        if not frames:
            yield tuple(out) + tail
            return
        pause = REVEAL_S / (len(frames) + 1)
        yield tuple(out[:text_at]) + (frames[0],) + tuple(out[text_at + 1:]) + (gr.skip(), gr.skip())
        only_text = [gr.skip()] * outputs_len
        for html in frames[1:] + [out[text_at]]:
            time.sleep(pause)
            only_text[text_at] = html
            yield tuple(only_text) + (gr.skip(), gr.skip())
        yield (gr.skip(),) * outputs_len + tail
    on_tick.__name__ = f"{step_fn.__name__}_tick"
    return on_tick


@friendly
@friendly
def talon_import(run: Run | None, path: str | None, show_pruned=True) -> tuple:
    """Replay an exported TALON trace from step 1; a bad file is one line and the session stays as it was."""
    imported = import_trace(path, "talon", live(run))
    try:
        return tree_outputs(imported, tree_view(imported, 0, show_pruned), 0) + STOP_PLAYING
    except Exception as exc:  # shaped like a trace, but its values cannot be drawn
        raise SessionError(f"the trace's steps could not be drawn ({type(exc).__name__}): is it an unedited export?")


@friendly
def specbound_import(run: Run | None, path: str | None, annealed=True) -> tuple:
    imported = import_trace(path, "specbound", live(run))
    try:
        return exit_outputs(imported, exit_view(imported, 0, annealed), 0) + STOP_PLAYING
    except Exception as exc:
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
