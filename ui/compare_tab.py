"""The Compare tab, builder and handlers in one place: one prompt through every method, each run to the end and
timed on this machine (the runs and their timing: ui/compare.py).

Its public API endpoint (/compare) keeps its positional order for existing callers: COMPARE_INPUTS is that order,
new inputs go at its end, and a new output goes before the status, which stays last."""
from __future__ import annotations

import gradio as gr

from core import knobs as core_knobs
from ui.compare import MAX_ROUNDS, ROUNDS, compare, conclusions, parts
from ui.examples import default_prompt
from ui.handlers import friendly, make_config
from ui.jobs import LONG, Job, ar_ms_per_token, cancel, long_run, session_key
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS, preset_label
from ui.models import DEFAULT_DRAFTER
from ui.preset_line import method_knobs, settings_text
from ui.view_specs import drafter_input
from ui.wiring import named
from viz.escape import esc
from viz.html import compare_cards
from viz.tune_figs import compare_bars

DEFAULT_KNOBS = {**{k.name: k.default for m in ("talon", "specbound") for k in core_knobs.METHOD_KNOBS[m]
                    if k.name != "auto"}, "gamma": 5, "depth": 8}  # every knob the methods read, auto aside
# Compare's settings: the TALON and SpecBound views' own knobs (the default: Compare starts from what the views
# run), the papers' presets, or those measured best on this CPU (the embedded tree, SpecBound fast)
SPECBOUND_WITH = {"paper": "paper", "embedded": "fast"}
VIEW = "view"
TREE_SETTINGS = {VIEW: "the TALON and SpecBound views' knobs, as set there now",
                 **{name: f"{preset_label(name)}; SpecBound {SPECBOUND_WITH[name]}" for name in ("paper", "embedded")}}
VIEW_KNOBS = tuple(k.name for k in TALON_KNOBS) + ("auto",) + tuple(k.name for k in SPECBOUND_KNOBS) + ("exit_layers",)


def compare_knobs(trees: str, view: dict | None = None) -> dict:
    """Every method's knobs for Compare: the defaults, with static's and TALON's from the chosen preset (or the
    TALON view's knobs) and SpecBound's from its counterpart (paper, fast beside the embedded tree, or the
    SpecBound view's knobs). `view`: the views' values by name (those missing take their defaults)."""
    if trees not in TREE_SETTINGS:
        raise ValueError(f"unknown tree settings {trees!r} (choose from {', '.join(TREE_SETTINGS)})")
    if trees == VIEW:
        view = view or {}
        talon = method_knobs("talon", view)
        talon.pop("auto")  # Compare's trees run at a fixed N; auto is the TALON view's own
        return {**DEFAULT_KNOBS, **talon, **method_knobs("specbound", view)}
    specbound = core_knobs.resolve("specbound", {"preset": SPECBOUND_WITH[trees]})
    return {**DEFAULT_KNOBS, **core_knobs.preset_knobs(trees), **specbound}


def compare_settings(knobs: dict) -> str:
    """What Compare ran, in words: the trees' preset (or own settings) and SpecBound's."""
    talon = core_knobs.resolve("talon", {k: v for k, v in knobs.items() if k != "auto"})
    specbound = core_knobs.resolve("specbound", knobs)
    return (f"static and TALON at {settings_text('talon', talon)} (static D = {knobs['depth']}), SpecBound at "
            f"{settings_text('specbound', specbound)}, chain γ = {knobs['gamma']}")


COMPARE_HEADERS = ["method", "MAT", "mean δ", "tokens/s", "speed-up", "lossless", "text"]


def compare_outputs(rows: list) -> dict:
    bars = [{"method": r.method, "mat": r.mat, "speedup": r.speedup, "lo": r.lo, "hi": r.hi} for r in rows
            if r.mat is not None]
    return {"table": [r.as_row() for r in rows], "plot": compare_bars(bars),
            "cards": compare_cards(COMPARE_HEADERS, [r.as_row() for r in rows])}


@friendly
def run_compare(prompt: str, max_new_tokens: int, temperature: float, target: str = "embedded",
                draft: str = "embedded", drafter: str = DEFAULT_DRAFTER, trees: str = VIEW, chat: str = "auto",
                *view_values, rounds: int = ROUNDS, request: gr.Request = None, **view_knobs):
    """Every method on one prompt (chain γ = 5; static and TALON at the `trees` setting: the views' own knobs,
    given after `chat` in VIEW_KNOBS order or by name, else their defaults; or the paper or embedded preset);
    chain, static and TALON draft with `drafter`; `rounds` of the methods, each followed by plain AR (1–3). A
    generator of outputs by name (table, plot, status): the estimate first, naming the settings, then the table
    after each run (Cancel keeps it)."""
    view = {**dict(zip(VIEW_KNOBS, view_values)), **view_knobs}
    knobs = compare_knobs(trees, {k: v for k, v in view.items() if v is not None})
    cfg = make_config("ar", prompt, {}, [], {"temperature": temperature, "seed": 0, "max_new_tokens": max_new_tokens},
                      target, draft, drafter, chat=chat)
    rounds = int(rounds)
    if not 1 <= rounds <= MAX_ROUNDS:
        raise ValueError(f"rounds must be 1 to {MAX_ROUNDS} (got {rounds})")
    steps = parts(rounds)
    job = Job(f"Compare ({compare_settings(knobs)}; {rounds} round{'s' if rounds > 1 else ''}): {len(steps)} runs of "
              f"up to {cfg.max_new_tokens} tokens", steps, cfg.max_new_tokens, ar_ms_per_token(cfg.target, cfg.prompt))
    yield from long_run(job, session_key(request, "compare"), lambda check: compare(cfg, knobs, check, rounds),
                        compare_outputs, footer=conclusions_html)


def conclusions_html(rows: list) -> str:
    """Under the final status line: what the ranges support and what they do not (ui/compare.py)."""
    items = "".join(f"<li>{esc(line)}</li>" for line in conclusions(rows))
    return f'<div class="ss-note" id="compare-conclusions"><b>What this run can conclude</b><ul>{items}</ul></div>'


def cancel_compare(request: gr.Request = None) -> str:
    """Cancel: this session's Compare stops before its next engine step; what finished stays."""
    return cancel(request, "compare", "compare")


COMPARE_INPUTS = ("prompt", "max_new_tokens", "temperature", "target", "draft", "drafter", "trees", "chat",
                  *VIEW_KNOBS, "rounds")  # the views' own knobs, for trees = "view"; then rounds


def compare_tab(models: dict, views: dict | None = None) -> dict:
    gr.Markdown("One prompt through every method, each run to the end and timed on this machine, in rounds (the "
                "second in reverse order) with plain AR timed before and after each. Each speed-up comes with its "
                "range (every round's steps resampled against those AR passes), drawn as error bars.")
    c: dict = dict(models)
    for name in VIEW_KNOBS:  # trees = "view": the TALON and SpecBound views' own knobs, read when Compare runs
        view = "talon" if name in views["talon"] and name not in views["specbound"] else "specbound"
        c[name] = views[view][name]
    with gr.Row():
        c["prompt"] = gr.Textbox(value=default_prompt(), lines=3, label="prompt", scale=3)
        with gr.Column(scale=1):
            c["max_new_tokens"] = gr.Slider(8, 128, value=48, step=1, label="max new tokens",
                                            elem_id="compare-max-new", elem_classes="ss-knob")
            c["temperature"] = gr.Slider(0, 2, value=0, step=0.05, label="temperature", info="0 = greedy",
                                         elem_classes="ss-knob")
            c["rounds"] = gr.Slider(1, MAX_ROUNDS, value=ROUNDS, step=1, label="rounds", elem_id="compare-rounds",
                                    elem_classes="ss-knob", info="more rounds: a range that covers more of this "
                                                                 "machine's noise, at that many times the time")
            c["drafter"] = drafter_input("compare-drafter")
            c["trees"] = gr.Radio([(label, name) for name, label in TREE_SETTINGS.items()], value=VIEW,
                                  label="static and TALON settings", elem_id="compare-trees",
                                  info="what the views run (the default), the papers' preset, or the small deep "
                                       "tree measured fastest on this CPU; the status line names what ran")
            with gr.Row():
                go = gr.Button("Run all methods", variant="primary", elem_id="compare-run")
                stop = gr.Button("Cancel", elem_id="compare-cancel")
    c["status"] = gr.HTML(elem_id="compare-status", min_height=0)
    c["table"] = gr.Dataframe(headers=COMPARE_HEADERS, label="results", wrap=True, elem_id="compare-table",
                              column_widths=["9%", "7%", "8%", "9%", "16%", "9%", "42%"])
    c["cards"] = gr.HTML(elem_id="compare-cards", min_height=0)  # the table as cards, shown on a phone
    c["plot"] = gr.Plot(show_label=False, elem_id="compare-plot")
    running = go.click(**named(run_compare, COMPARE_INPUTS, ("table", "plot", "cards", "status"), c), api_name="compare",
                       show_progress="minimal", **LONG)
    stop.click(cancel_compare, None, [c["status"]], cancels=[running], api_name="compare_cancel")
    return c
