"""The Compare and Tune tabs: layout and wiring by name (ui/wiring.named), like the stepping views.

Their public API endpoints (/compare, /sweep, /cost_curve) keep their positional order for existing callers:
the inputs tuples below are that order, new inputs go at their ends, and a new output goes before the status,
which stays last."""
from __future__ import annotations

import gradio as gr

from ui import learn
from ui.examples import default_prompt
from ui.sweeps import SWEEPS, fixed_text, symbol
from ui.tab_handlers import (COMPARE_HEADERS, TREE_SETTINGS, VIEW, VIEW_KNOBS, cancel_compare, cancel_sweep, cost_curve,
                             remeasure_cost_curve, run_compare, run_sweep, sweep_defaults)
from ui.view_specs import drafter_input
from ui.wiring import named

LONG = dict(concurrency_id="long", concurrency_limit=1)  # Compare, Tune, cost curve: one at a time per server,
# in their own group so a Step never queues behind them (they also pause between steps: ui/priority.py)
COMPARE_INPUTS = ("prompt", "max_new_tokens", "temperature", "target", "draft", "drafter", "trees", "chat",
                  *VIEW_KNOBS)  # the views' own knobs, for trees = "view"
TUNE_INPUTS = ("kind", "x_values", "y_values", "n_prompts", "max_new_tokens", "target", "draft", "drafter", "chat",
               "fixed", "vllm_version")
COST_INPUTS = ("run", "target", "draft", "drafter")


def compare_tab(models: dict, views: dict | None = None) -> dict:
    gr.Markdown("One prompt through every method, each run to the end and timed on this machine. Each speed-up "
                "comes with its range (resampled steps against AR timed before and after), drawn as error bars.")
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


def tune_tab(models: dict, talon_run: gr.State) -> dict:
    gr.Markdown("Sweep two knobs over a few example prompts (greedy), every other knob held as the *fixed knobs* "
                "box says. Each cell runs every prompt to the end; its speed-up comes with a range, and cells "
                "timed over too few tokens to rank say so.")
    first = SWEEPS[next(iter(SWEEPS))]
    c: dict = {**models, "run": talon_run}
    with gr.Row():
        c["kind"] = gr.Radio(list(SWEEPS), value=next(iter(SWEEPS)), label="sweep", elem_id="tune-kind")
        c["x_values"] = gr.Textbox(value=first.xs, label=f"{symbol(first.x)} values", elem_id="tune-x")
        c["y_values"] = gr.Textbox(value=first.ys, label=f"{symbol(first.y)} values", elem_id="tune-y")
    c["fixed"] = gr.Textbox(value=fixed_text(first.fixed), label="fixed knobs (held in every cell)",
                            elem_id="tune-fixed", info="name = value pairs, e.g. K = 2, T_shape = 0.5; empty: the "
                            "sweep's own; a knob left out takes the method's default (the summary lists every knob held)")
    with gr.Row():
        c["n_prompts"] = gr.Slider(1, 5, value=3, step=1, label="prompts", elem_id="tune-prompts")
        c["max_new_tokens"] = gr.Slider(8, 64, value=32, step=1, label="max new tokens", elem_id="tune-max-new")
        c["drafter"] = drafter_input("tune-drafter")
        c["vllm_version"] = gr.Textbox("", label="vLLM version (optional)", placeholder="e.g. 0.11.2",
                                       elem_id="tune-vllm-version", min_width=140,
                                       info="a chain sweep's vLLM settings are for this release; empty: the one "
                                            "they were checked against (named under the settings)")
        with gr.Column(min_width=160):
            go = gr.Button("Run sweep", variant="primary", elem_id="tune-run")
            stop = gr.Button("Cancel", elem_id="tune-cancel")
    c["status"] = gr.HTML(elem_id="tune-status", min_height=0)
    with gr.Row():
        c["mat"] = gr.Plot(show_label=False, elem_id="tune-mat")  # the figures' titles say what they are
        c["speedup"] = gr.Plot(show_label=False, elem_id="tune-speedup")
    c["summary"] = gr.HTML(elem_id="tune-summary", min_height=0)
    c["kind"].change(**named(sweep_defaults, ("kind",), ("x_values", "y_values", "fixed"), c), api_visibility="private")
    running = go.click(**named(run_sweep, TUNE_INPUTS, ("mat", "speedup", "summary", "status"), c), api_name="sweep",
                       show_progress="minimal", **LONG)
    stop.click(cancel_sweep, None, [c["status"]], cancels=[running], api_name="sweep_cancel")
    cost_block(c)
    return c


def cost_block(c: dict) -> None:
    """The cost curve under the sweep: shown as kept (measured when none is), or measured again now."""
    gr.Markdown("### This machine's cost curve\nHow long one target forward takes for n new tokens, measured here "
                "(kept a day per device, model and drafter, or until the machine changes; a measurement takes a few "
                "seconds; points a busy moment inflated are timed again), with the N your TALON run used marked, and "
                "the speed-up over AR modelled for that run at each budget N.")
    with gr.Row():
        show = gr.Button("Show the cost curve", elem_id="tune-cost-run")
        again = gr.Button("Measure it again now", elem_id="tune-cost-remeasure")
    c["curve"] = gr.Plot(show_label=False, elem_id="tune-cost")
    with gr.Accordion("Learn: why the best tree is small on a CPU and large on a GPU", open=False):
        gr.Markdown(learn.HARDWARE)
    show.click(**named(cost_curve, COST_INPUTS, ("curve",), c), api_name="cost_curve", **LONG)
    again.click(**named(remeasure_cost_curve, COST_INPUTS, ("curve",), c), api_name="cost_curve_remeasure", **LONG)
