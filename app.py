"""SpecScope: speculative decoding, one real step at a time. `python app.py` serves the page offline on
the embedded models and prints its URL (GRADIO_SERVER_NAME / GRADIO_SERVER_PORT are honoured).

Layout and wiring only: handlers live in ui/handlers.py and ui/tab_handlers.py, figures in viz/."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import gradio as gr

from ui import learn
from ui.examples import default_prompt, example_prompts
from ui.handlers import (PLAY, apply_preset, export_trace, remeasure, reset_exit, reset_tree, set_speed,
                         specbound_extras, specbound_import, specbound_load, specbound_replay, specbound_step,
                         talon_extras, talon_import, talon_load, talon_replay, talon_step, tick, toggle_play)
from ui.knobs import PRESETS, SAMPLING_KNOBS, SPECBOUND_KNOBS, TALON_KNOBS, Knob
from ui.limits import CACHES, state_capacity, state_ttl_s
from ui.models import DEFAULT_DRAFTER, model_box_info
from ui.preview import PREVIEW
from ui.share import apply_link, specbound_link, talon_link
from ui.tab_handlers import (COMPARE_HEADERS, cancel_compare, cancel_sweep, cost_curve, load_models, run_compare, run_sweep,
                             sweep_defaults)
from ui.tune import SWEEPS, symbol

CSS = (Path(__file__).parent / "assets" / "app.css").read_text(encoding="utf-8")
HEAD = "<script>" + (Path(__file__).parent / "assets" / "app.js").read_text(encoding="utf-8") + "</script>"
SYSTEM_FONTS = ["system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "Liberation Mono", "monospace"]
THEME = gr.themes.Soft(font=SYSTEM_FONTS, font_mono=MONO_FONTS)  # plain names: nothing fetched from outside
ENGINE = "engine"  # one concurrency group for everything that runs the models
CONCURRENCY = int(os.environ.get("SPECSCOPE_CONCURRENCY", "2"))


def run_state() -> gr.State:
    """A visitor's Run: kept SPECSCOPE_STATE_TTL_S after its last update; its caches are freed when it goes."""
    return gr.State(None, time_to_live=state_ttl_s(), delete_callback=CACHES.forget)


def knob_input(k: Knob):
    if k.name == "seed":
        return gr.Number(value=k.default, precision=0, minimum=k.minimum, maximum=k.maximum, label=k.label, info=k.info,
                         elem_classes="ss-knob")
    return gr.Slider(k.minimum, k.maximum, value=k.default, step=k.step, label=k.label, info=k.info,
                     elem_classes="ss-knob", min_width=200)


DRAFTER_CHOICES = [(label, name) for label, name in [
    ("eagle3 (head on the target's features)", "eagle3"), ("model (1-layer draft LM)", "model"),
    ("lookup (n-gram in the text)", "lookup")] if name != "eagle3" or DEFAULT_DRAFTER == "eagle3"]  # head shipped?


def drafter_input(elem_id: str) -> gr.Radio:
    """Who proposes the draft tree; changing it starts a fresh run like any knob."""
    return gr.Radio(DRAFTER_CHOICES, value=DEFAULT_DRAFTER, label="drafter", elem_id=elem_id,
                    info="where q comes from; the static tree beside it uses the same drafter")


def outcomes_block(state, prefix: str) -> list:
    """Text, τ/δ timeline, (δ, τ) scatter and stats: shown under every stepping view."""
    gr.Markdown("### Outcomes")
    text = gr.HTML(elem_classes="ss-outcome-text", elem_id=f"{prefix}-text")
    with gr.Row():
        timeline = gr.Plot(show_label=False, elem_id=f"{prefix}-timeline", min_width=300)
        scatter = gr.Plot(show_label=False, elem_id=f"{prefix}-scatter", min_width=300)
    stats = gr.HTML(elem_id=f"{prefix}-stats")
    again = gr.Button("Re-measure the AR baseline", size="sm", elem_id=f"{prefix}-remeasure")
    again.click(remeasure, [state], [stats], api_name=f"{prefix}_remeasure", concurrency_id=ENGINE)
    with gr.Accordion("Learn: is it faster, and is it exact?", open=False):
        gr.Markdown(learn.SPEEDUP + "\n\n" + learn.LOSSLESS)
    return [text, timeline, scatter, stats]


def example_label(prompt: str) -> str:
    first = prompt.strip().splitlines()[0] if prompt.strip() else prompt
    return first if len(first) <= 48 else first[:47] + "…"


def prompt_row(prefix: str) -> tuple:
    """Prompt, Step / Play / Reset and the example picker on one row, above the fold: the first thing to
    use. The prompt box scrolls past a few lines instead of growing with a huge prompt."""
    with gr.Row(equal_height=False, elem_classes="ss-top"):
        with gr.Column(scale=3, min_width=280):
            prompt = gr.Textbox(value=default_prompt(), lines=2, max_lines=6, label="prompt",
                                elem_id=f"{prefix}-prompt")
        with gr.Column(scale=2, min_width=280):
            with gr.Row(elem_classes="ss-buttons"):
                step = gr.Button("Step", variant="primary", elem_id=f"{prefix}-step", min_width=70)
                play = gr.Button(PLAY, elem_id=f"{prefix}-play", min_width=70)
                reset = gr.Button("Reset", elem_id=f"{prefix}-reset", min_width=70)
            example = gr.Dropdown([(example_label(p), p) for p in example_prompts()], value=None,
                                  label="example prompts", elem_id=f"{prefix}-examples")
    example.input(lambda text: text or gr.skip(), [example], [prompt], api_visibility="private")
    return prompt, step, play, reset


def speed_timer() -> tuple:
    speed = gr.Slider(0.2, 3.0, value=0.8, step=0.1, label="play speed (seconds per step)")
    return speed, gr.Timer(0.8, active=False)


def wire_stepping(name: str, buttons: tuple, replay, inputs: list, outputs: list, extras: dict, fns: tuple,
                  view, text) -> None:
    """Step / Play / Reset / replay of a stepping tab. `outputs[0]` is the session state, `extras` the slower
    figures drawn after each step, `view` a display toggle that redraws the shown step from stored traces,
    `text` the generated text that Play streams token by token."""
    step_fn, reset_fn, replay_fn = fns
    step, play, reset, speed, timer = buttons
    state = outputs[0]
    after = dict(extras, api_visibility="private", concurrency_id=ENGINE, show_progress="hidden")
    step.click(step_fn, inputs, outputs, api_name=f"{name}_step", concurrency_id=ENGINE).success(**after)
    timer.tick(tick(step_fn, len(outputs), outputs.index(text)), inputs, outputs + [timer, play],
               api_visibility="private", concurrency_id=ENGINE, trigger_mode="once",
               show_progress="hidden").then(**after)
    play.click(toggle_play, [play, speed], [timer, play], api_visibility="private")
    speed.change(set_speed, [speed], [timer], api_visibility="private")
    reset.click(reset_fn, [state, view], outputs + [timer, play], api_name=f"{name}_reset")
    replay.input(replay_fn, [state, replay, view], outputs[1:], api_name=f"{name}_replay", trigger_mode="always_last")
    view.change(replay_fn, [state, replay, view], outputs[1:], api_visibility="private")


COPY_JS = ("(q) => { const u = location.origin + location.pathname + q; "
           "try { navigator.clipboard.writeText(u).catch(() => {}); } catch (e) {} return u; }")


def share_row(prefix: str, fields: list, fn) -> None:
    """Copy link: the view's prompt and knobs as query parameters (ui/share.py); the browser adds its own
    address, so the link is right behind a proxy too, and copies it where the clipboard is allowed."""
    with gr.Row(equal_height=True):
        btn = gr.Button("Copy link to these settings", size="sm", elem_id=f"{prefix}-share", min_width=140)
        link = gr.Textbox(show_label=False, placeholder="a link that opens the page with this prompt and these knobs",
                          buttons=["copy"], interactive=False, elem_id=f"{prefix}-link", scale=4)
    btn.click(fn, fields, [link], api_name=f"{prefix}_link").then(None, [link], [link], js=COPY_JS)


def export_block(state, api_name: str, prefix: str) -> gr.File:
    """Export the run as JSON; returns the upload box that imports such a file (wired by the tab)."""
    with gr.Accordion("Export or import a run's traces", open=False):
        with gr.Row():
            with gr.Column():
                btn = gr.Button("Export trace JSON", elem_id=f"{prefix}-export")
                file = gr.File(label="trace JSON", elem_id=f"{prefix}-export-file")
            upload = gr.File(label="Import a trace JSON to replay it (shown as imported, not a live run)",
                             file_types=[".json"], elem_id=f"{prefix}-import")
        data = gr.JSON(label="traces", open=False)
    btn.click(export_trace, [state], [file, data], api_name=api_name)
    return upload


def talon_tab(models: list) -> tuple[dict, gr.State]:
    state = run_state()
    prompt, step, play, reset = prompt_row("talon")
    with gr.Row(equal_height=False):
        tree = gr.Plot(show_label=False, elem_id="talon-tree", min_width=300)
        static = gr.Plot(show_label=False, elem_id="static-tree", min_width=300)
    budget, levels = gr.HTML(), gr.HTML(elem_classes="ss-scroll")
    replay = gr.Slider(1, 2, value=1, step=1, label="replay step", interactive=False, elem_id="talon-replay")
    with gr.Accordion("Knobs", open=True, elem_id="talon-knobs"):
        with gr.Row():
            preset = gr.Dropdown(list(PRESETS), value=list(PRESETS)[0], label="preset", min_width=260)
            drafter = drafter_input("talon-drafter")
            speed, timer = speed_timer()
        with gr.Row():
            knobs = [knob_input(k) for k in TALON_KNOBS]
        with gr.Row():
            sampling = [knob_input(k) for k in SAMPLING_KNOBS]
        with gr.Row():
            show_pruned = gr.Checkbox(True, label="show pruned candidates (faint)")
            with_static = gr.Checkbox(True, label="draft the static tree beside it (same prefix, same N)")
            auto = gr.Checkbox(False, label="auto: choose N per step for this machine (N above is the cap)",
                               elem_id="talon-auto")
        link_fields = [prompt, *knobs, *sampling, drafter, auto]  # ui.share.FIELDS["talon"] order
        share_row("talon", link_fields, talon_link)
    outs = outcomes_block(state, "talon")
    trace = gr.JSON(label="this step's trace", open=False)
    upload = export_block(state, "export_talon", "talon")
    with gr.Accordion("Learn: steps, trees, the gate, drafters and hardware", open=False):
        gr.Markdown("\n\n".join([learn.STEP, learn.TREE, learn.GATE, learn.FEATURES, learn.HARDWARE, learn.KEYS]))
    inputs = [state, prompt, *knobs, *sampling, *models, show_pruned, drafter, auto]
    outputs = [state, tree, static, budget, levels, *outs, replay, trace]
    extras = dict(fn=talon_extras, inputs=[state, show_pruned, with_static], outputs=[static, outs[2], outs[3]])
    wire_stepping("talon", (step, play, reset, speed, timer), replay, inputs, outputs, extras,
                  fns=(talon_step, reset_tree, talon_replay), view=show_pruned, text=outs[0])
    preset.change(apply_preset, [preset], knobs + [auto], api_visibility="private")
    upload.upload(talon_import, [state, upload, show_pruned], outputs + [timer, play], api_name="talon_import")
    return dict(fn=talon_load, inputs=[show_pruned], outputs=outputs[1:]), state, link_fields  # load: preview


def specbound_tab(models: list) -> tuple[dict, list]:
    state = run_state()
    prompt, step, play, reset = prompt_row("specbound")
    heatmap = gr.Plot(show_label=False, elem_id="specbound-heatmap")
    with gr.Row(equal_height=False):
        bars = gr.Plot(show_label=False, elem_id="specbound-bars", min_width=300)
        why = gr.HTML(min_height=0)
    replay = gr.Slider(1, 2, value=1, step=1, label="replay step", interactive=False, elem_id="specbound-replay")
    with gr.Accordion("Knobs", open=True, elem_id="specbound-knobs"):
        with gr.Row():
            knobs = [knob_input(k) for k in SPECBOUND_KNOBS]
            exit_layers = gr.Textbox("", label="exit layers", placeholder="every layer up to d_max",
                                     info="e.g. 2,4: the only layers with an exit check", elem_id="specbound-exit-layers")
        with gr.Row():
            sampling = [knob_input(k) for k in SAMPLING_KNOBS]
        with gr.Row():
            annealed = gr.Radio([("annealed", True), ("raw", False)], value=True, label="confidence shown")
            speed, timer = speed_timer()
        link_fields = [prompt, *knobs, *sampling, exit_layers]  # ui.share.FIELDS["specbound"] order
        share_row("specbound", link_fields, specbound_link)
    outs = outcomes_block(state, "specbound")
    trace = gr.JSON(label="this step's trace", open=False)
    upload = export_block(state, "export_specbound", "specbound")
    with gr.Accordion("Learn: ACT and BSCS", open=False):
        gr.Markdown("\n\n".join([learn.STEP, learn.ACT, learn.BSCS, learn.KEYS]))
    inputs = [state, prompt, *knobs, *sampling, models[0], annealed, exit_layers]
    outputs = [state, heatmap, bars, why, *outs, replay, trace]
    extras = dict(fn=specbound_extras, inputs=[state, annealed], outputs=[outs[3]])
    wire_stepping("specbound", (step, play, reset, speed, timer), replay, inputs, outputs, extras,
                  fns=(specbound_step, reset_exit, specbound_replay), view=annealed, text=outs[0])
    upload.upload(specbound_import, [state, upload, annealed], outputs + [timer, play],
                  api_name="specbound_import")
    return dict(fn=specbound_load, inputs=[annealed], outputs=outputs[1:]), link_fields


def compare_tab(models: list) -> None:
    gr.Markdown("One prompt through every method at SPEC defaults, each run to the end and timed on this machine.")
    with gr.Row():
        prompt = gr.Textbox(value=default_prompt(), lines=3, label="prompt", scale=3)
        with gr.Column(scale=1):
            max_new = gr.Slider(8, 128, value=48, step=1, label="max new tokens", elem_id="compare-max-new",
                                elem_classes="ss-knob")
            temperature = gr.Slider(0, 2, value=0, step=0.05, label="temperature", info="0 = greedy",
                                    elem_classes="ss-knob")
            drafter = drafter_input("compare-drafter")
            with gr.Row():
                go = gr.Button("Run all methods", variant="primary", elem_id="compare-run")
                stop = gr.Button("Cancel", elem_id="compare-cancel")
    status = gr.HTML(elem_id="compare-status", min_height=0)
    table = gr.Dataframe(headers=COMPARE_HEADERS, label="results", wrap=True, elem_id="compare-table",
                         column_widths=["9%", "7%", "8%", "9%", "16%", "9%", "42%"])
    plot = gr.Plot(show_label=False, elem_id="compare-plot")
    running = go.click(run_compare, [prompt, max_new, temperature, *models, drafter], [table, plot, status],
                       api_name="compare", concurrency_id=ENGINE, show_progress="minimal")
    stop.click(cancel_compare, None, [status], cancels=[running], api_name="compare_cancel")


def tune_tab(models: list, talon_state: gr.State) -> None:
    gr.Markdown("Sweep two knobs over a few example prompts (greedy). Each cell runs every prompt to the end.")
    first = list(SWEEPS)[0]
    with gr.Row():
        kind = gr.Radio(list(SWEEPS), value=first, label="sweep")
        x_vals = gr.Textbox(value=SWEEPS[first][3], label=f"{symbol(SWEEPS[first][1])} values")
        y_vals = gr.Textbox(value=SWEEPS[first][4], label=f"{symbol(SWEEPS[first][2])} values")
    with gr.Row():
        n_prompts = gr.Slider(1, 5, value=2, step=1, label="prompts")
        max_new = gr.Slider(8, 64, value=24, step=1, label="max new tokens")
        drafter = drafter_input("tune-drafter")
        with gr.Column(min_width=160):
            go = gr.Button("Run sweep", variant="primary", elem_id="tune-run")
            stop = gr.Button("Cancel", elem_id="tune-cancel")
    status = gr.HTML(elem_id="tune-status", min_height=0)
    with gr.Row():
        mat, speed = gr.Plot(label="MAT", elem_id="tune-mat"), gr.Plot(label="speed-up over AR", elem_id="tune-speedup")
    kind.change(sweep_defaults, [kind], [x_vals, y_vals], api_visibility="private")
    running = go.click(run_sweep, [kind, x_vals, y_vals, n_prompts, max_new, *models, drafter], [mat, speed, status],
                       api_name="sweep", concurrency_id=ENGINE, show_progress="minimal")
    stop.click(cancel_sweep, None, [status], cancels=[running], api_name="sweep_cancel")
    gr.Markdown("### This machine's cost curve\nHow long one target forward takes for n new tokens, measured here "
                "(cached per device, model and drafter; the first measurement takes a few seconds), with the N your "
                "TALON run used marked, and the speed-up over AR modelled for that run at each budget N.")
    measure = gr.Button("Measure / show the cost curve", elem_id="tune-cost-run")
    curve = gr.Plot(show_label=False, elem_id="tune-cost")
    with gr.Accordion("Learn: why the best tree is small on a CPU and large on a GPU", open=False):
        gr.Markdown(learn.HARDWARE)
    measure.click(cost_curve, [talon_state, models[0], models[1], drafter], [curve], api_name="cost_curve",
                  concurrency_id=ENGINE)


def build_demo() -> gr.Blocks:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # offline by default: no pings from the server
    with gr.Blocks(title="SpecScope", delete_cache=(600, 3600)) as demo:  # Gradio's copies of exports: 1 h
        gr.Markdown("# SpecScope\n" + learn.INTRO)
        link_msg = gr.HTML(elem_id="share-msg", min_height=0, visible=False)
        with gr.Accordion("Model", open=False):
            with gr.Row():
                target = gr.Textbox("embedded", label="target model", info=model_box_info())
                draft = gr.Textbox("embedded", label="draft model", info="must share the target's tokenizer")
                load = gr.Button("Load")
            msg = gr.Markdown()
            load.click(load_models, [target, draft], [msg], api_visibility="private", concurrency_id=ENGINE)
        models = [target, draft]
        with gr.Tabs() as tabs:
            with gr.Tab("TALON", id="talon"):
                talon_load_, talon_state, talon_fields = talon_tab(models)
                loads = [talon_load_]
            with gr.Tab("SpecBound", id="specbound"):
                specbound_load_, specbound_fields = specbound_tab(models)
                loads.append(specbound_load_)
            with gr.Tab("Compare", id="compare"):
                compare_tab(models)
            with gr.Tab("Tune", id="tune"):
                tune_tab(models, talon_state)
        for load in loads:  # waits for the start-up step, outside the engine's queue slots
            demo.load(**load, api_visibility="private", show_progress="hidden", concurrency_limit=None)
        demo.load(apply_link, None, [tabs, link_msg, *talon_fields, *specbound_fields], api_visibility="private",
                  show_progress="hidden", concurrency_limit=None)  # a shared link fills the knobs
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=64)
    return demo


def warm_up() -> None:
    """Load the default models and compute the start-up preview steps while the page is already being
    served: the page opens with a real step drawn, and a visitor's first Step pays neither the load nor
    the first-call overheads."""
    PREVIEW.compute()
    if PREVIEW.error:
        print(f"warning: {PREVIEW.error}", flush=True)


def main() -> None:
    demo = build_demo()
    threading.Thread(target=warm_up, daemon=True).start()
    demo.launch(theme=THEME, css=CSS, head=HEAD, server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), show_error=False,
                state_session_capacity=state_capacity())


if __name__ == "__main__":
    main()
