"""SpecScope: speculative decoding, one real step at a time. `python app.py` serves the page offline on
the embedded models and prints its URL (GRADIO_SERVER_NAME / GRADIO_SERVER_PORT are honoured).

Layout and wiring only: the stepping views' handlers live in ui/handlers.py, the Compare and Tune tabs (builder and
handlers) in ui/compare_tab.py and ui/tune_tab.py, figures in viz/."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import gradio as gr
import torch
from starlette.middleware import Middleware

from ui import handlers as h
from ui import learn
from ui.compare_tab import compare_tab
from ui.examples import default_prompt, example_prompts
from ui.gpu import remote
from ui.handlers import PLAY, choose_pair, export_trace, load_models, remeasure, set_speed, toggle_play
from ui.http_guard import DeepLinkGuard
from ui.importer import max_bytes
from ui.knobs import SAMPLING_KNOBS, Knob
from ui.limits import engine_concurrency, state_capacity, state_ttl_s, torch_threads
from ui.models import default_model, model_box_info, pair_choices, preload
from ui.open_link import share_link, wire_open
from ui.preset_line import running_html, wire_running
from ui.preview import PREVIEW
from ui.jobs import JOBS, session_key
from ui.run import Run, forget
from ui.share import FIELDS, apply_link
from ui.tune_tab import tune_tab
from ui.view_specs import CAPTIONS, VIEWS, ViewSpec
from ui.walk import walk_block, wire_walk
from ui.wiring import named

CSS = (Path(__file__).parent / "assets" / "app.css").read_text(encoding="utf-8")
HEAD = "<script>" + (Path(__file__).parent / "assets" / "app.js").read_text(encoding="utf-8") + "</script>"
SYSTEM_FONTS = ["system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "Liberation Mono", "monospace"]
THEME = gr.themes.Soft(font=SYSTEM_FONTS, font_mono=MONO_FONTS).set(  # plain names: nothing fetched from outside
    checkbox_border_color="*neutral_500", checkbox_border_color_dark="*neutral_400",  # an unticked box is visible
    checkbox_border_width="2px")
ENGINE = "engine"  # interactive engine calls: Step, Play, the panels after a step (ui/limits.engine_concurrency)
IMPORTS = dict(concurrency_id="import", concurrency_limit=1)  # trace imports: parsing is bounded, and serial


def run_state() -> gr.State:
    """A visitor's Run: kept SPECSCOPE_STATE_TTL_S after its last update; its caches are freed when it goes."""
    return gr.State(None, time_to_live=state_ttl_s(), delete_callback=forget)


def knob_input(k: Knob):
    """A declared knob's control: its page range, label and tooltip (core/knobs.py)."""
    if k.name == "seed":
        return gr.Number(value=k.default, precision=0, minimum=k.page_min, maximum=k.page_max, label=k.page_text,
                         info=k.info, elem_classes="ss-knob")
    return gr.Slider(k.page_min, k.page_max, value=k.default, step=k.step, label=k.page_text, info=k.info,
                     elem_classes="ss-knob", min_width=200)


def caption(text: str) -> None:
    if text:
        gr.Markdown(text, elem_classes="ss-caption")


def outcomes_block(state, prefix: str) -> dict:
    """τ/δ timeline, (δ, τ) scatter and stats: shown under every stepping view (the text sits above the
    knobs: it is what a visitor reads first)."""
    with gr.Row():
        with gr.Column(min_width=300):
            timeline = gr.Plot(show_label=False, elem_id=f"{prefix}-timeline")
            caption(CAPTIONS["timeline"])
        with gr.Column(min_width=300):
            scatter = gr.Plot(show_label=False, elem_id=f"{prefix}-scatter")
            caption(CAPTIONS["scatter"])
    stats = gr.HTML(elem_id=f"{prefix}-stats")
    again = gr.Button("Re-measure the AR baseline", size="sm", elem_id=f"{prefix}-remeasure")
    again.click(remeasure, [state], [stats], api_name=f"{prefix}_remeasure", concurrency_id=ENGINE)
    with gr.Accordion("Learn: is it faster, and is it exact?", open=False):
        gr.Markdown(learn.SPEEDUP + "\n\n" + learn.LOSSLESS)
    return dict(timeline=timeline, scatter=scatter, stats=stats)


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


def wire_stepping(spec: ViewSpec, c: dict) -> None:
    """Step / Play / Reset / replay / display options / import of a stepping view, all by name."""
    outs, options = spec.outputs, spec.options
    playing = outs + ("timer", "play")
    after = dict(**named(lambda **v: h.extras(spec, **v), ("run", *spec.extras_inputs), spec.extras, c),
                 api_visibility="private", concurrency_id=ENGINE, show_progress="hidden")
    c["step"].click(**named(lambda **v: h.step(spec, **v), spec.step_inputs, outs, c), api_name=f"{spec.name}_step",
                    concurrency_id=ENGINE).success(**after)
    c["timer"].tick(**named(h.tick(spec), spec.step_inputs, playing, c), api_visibility="private",
                    concurrency_id=ENGINE, trigger_mode="once", show_progress="hidden").then(**after)
    c["play"].click(toggle_play, [c["play"], c["speed"]], [c["timer"], c["play"]], api_visibility="private")
    c["speed"].change(set_speed, [c["speed"]], [c["timer"]], api_visibility="private")
    c["reset"].click(**named(lambda **v: h.reset(spec, **v), ("run", *options), playing, c),
                     api_name=f"{spec.name}_reset")
    replay = named(lambda **v: h.replay(spec, **v), ("run", "replay", *options), outs[1:], c)
    c["replay"].input(**replay, api_name=f"{spec.name}_replay", trigger_mode="always_last")
    for name in options:  # a display option redraws the shown step from stored traces
        c[name].change(**replay, api_visibility="private")
    c["path"].upload(**named(lambda **v: h.import_run(spec, **v), ("run", "path", *options), playing, c),
                     api_name=f"{spec.name}_import", **IMPORTS)
    c["share"].click(**named(lambda **v: {"link": share_link(spec.name, v)}, (*FIELDS[spec.name], "run", "replay"),
                             ("link",), c), api_name=f"{spec.name}_link").then(None, [c["link"]], [c["link"]], js=COPY_JS)


COPY_JS = ("(q) => { const u = location.origin + location.pathname + q; "
           "try { navigator.clipboard.writeText(u).catch(() => {}); } catch (e) {} return u; }")


def share_row(prefix: str) -> tuple:
    """Copy link: the view's prompt and knobs as query parameters (ui/share.py); the browser adds its own
    address, so the link is right behind a proxy too, and copies it where the clipboard is allowed."""
    with gr.Row(equal_height=True):
        btn = gr.Button("Copy link to these settings", size="sm", elem_id=f"{prefix}-share", min_width=140)
        link = gr.Textbox(show_label=False, placeholder="a link that opens the page with this prompt and these knobs",
                          buttons=["copy"], interactive=False, elem_id=f"{prefix}-link", scale=4)
    return btn, link


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


def stepping_tab(spec: ViewSpec, models: dict) -> dict:
    """One stepping view from its spec: prompt and buttons, the spec's panels, replay, knobs and controls,
    the outcomes, export / import and Learn; returns its components by name."""
    c: dict = {"run": run_state(), **models}
    c["prompt"], c["step"], c["play"], c["reset"] = prompt_row(spec.name)
    c.update(walk_block(spec.name))  # "Walk me through this step" and its panel (ui/walk.py)
    defaults = {k.name: k.default for k in spec.knobs}
    c["running"] = gr.HTML(running_html(spec.name, defaults), elem_id=f"{spec.name}-running", min_height=0)
    rows: dict[int, list] = {}
    for panel in spec.panels:
        rows.setdefault(panel.row, []).append(panel)
    for row in sorted(rows):
        if len(rows[row]) == 1:
            c[rows[row][0].name] = rows[row][0].make()
            caption(rows[row][0].caption)
            continue
        with gr.Row(equal_height=False):
            for panel in rows[row]:
                with gr.Column(min_width=300):
                    c[panel.name] = panel.make()
                    caption(panel.caption)
    c["replay"] = gr.Slider(1, 2, value=1, step=1, label="replay step", interactive=False,
                            elem_id=f"{spec.name}-replay")
    gr.Markdown("### Outcomes")
    c["text"] = gr.HTML(elem_classes="ss-outcome-text", elem_id=f"{spec.name}-text")
    with gr.Accordion("Knobs", open=True, elem_id=f"{spec.name}-knobs"):
        with gr.Row():
            for control in spec.controls:
                c[control.name] = control.make()
            c["speed"], c["timer"] = speed_timer()
        with gr.Row():
            for k in spec.knobs:
                c[k.name] = knob_input(k)
        with gr.Row():
            for k in SAMPLING_KNOBS:
                c[k.name] = knob_input(k)
        c["share"], c["link"] = share_row(spec.name)
    c.update(outcomes_block(c["run"], spec.name))
    with gr.Accordion("This step's trace (JSON)", open=False, elem_id=f"{spec.name}-trace-box"):
        c["trace"] = gr.JSON(label="this step's trace", open=False)  # folded: its viewer's buttons out of Tab
    c["path"] = export_block(c["run"], f"export_{spec.name}", spec.name)
    with gr.Accordion(spec.learn[0], open=False):
        gr.Markdown("\n\n".join(spec.learn[1:]))
    wire_stepping(spec, c)
    wire_walk(spec, c)
    wire_running(spec, c)  # which preset this is, and how fast it measured here (ui/preset_line.py)
    if spec.wire is not None:
        spec.wire(c)
    return c


def model_block() -> dict:
    """The model accordion: a curated (target, EAGLE-3 head) pair or the embedded one, the target and draft
    boxes it fills (the draft box names the head when the drafter is eagle3), and the chat template toggle."""
    with gr.Accordion("Model", open=False):
        pair = gr.Dropdown(pair_choices(), value=default_model(), label="model pair", elem_id="model-pair",
                           info="a target with the EAGLE-3 head published for it (only those this server allows)")
        with gr.Row():
            target = gr.Textbox(default_model(), label="target model", info=model_box_info(), elem_id="model-target")
            draft = gr.Textbox("embedded", label="draft model or EAGLE-3 head", elem_id="model-draft",
                               info="drafter model: a draft LM sharing the target's tokenizer; drafter eagle3: a head "
                                    "published for this target")
            chat = gr.Radio([("auto", "auto"), ("on", "on"), ("off", "off")], value="auto", label="chat template",
                            elem_id="model-chat", info="auto: wrap the prompt as one user turn when the target's "
                                                       "tokenizer has a template (the greyed italic text)")
            load = gr.Button("Load")
        msg = gr.Markdown()
        load.click(load_models, [target, draft], [msg], api_visibility="private", concurrency_id=ENGINE)
    return dict(pair=pair, target=target, draft=draft, chat=chat)


def build_demo() -> gr.Blocks:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # offline by default: no pings from the server
    with gr.Blocks(title="SpecScope", delete_cache=(600, 3600)) as demo:  # Gradio's copies of exports: 1 h
        gr.Markdown("# SpecScope\n" + learn.INTRO)
        with gr.Accordion("New here? How to read this page", open=False, elem_id="learn-top"):
            gr.Markdown("\n\n".join((learn.STEP, learn.TREE, learn.GATE, learn.SPEEDUP, learn.WALK)))
        link_msg = gr.HTML(elem_id="share-msg", min_height=0, visible=False)
        models = model_block()
        views = {}
        with gr.Tabs() as tabs:
            for spec in VIEWS.values():
                with gr.Tab(spec.title, id=spec.name):
                    views[spec.name] = stepping_tab(spec, {k: models[k] for k in ("target", "draft", "chat")})
            with gr.Tab("Compare", id="compare"):
                compare = compare_tab(models, views)
            with gr.Tab("Tune", id="tune"):
                tune = tune_tab(models, views["talon"]["run"])
        drafters = [views["talon"]["drafter"], compare["drafter"], tune["drafter"]]
        models["pair"].input(choose_pair, [models["pair"]], [models["target"], models["draft"], models["chat"],
                                                             *drafters], api_visibility="private")
        for spec in VIEWS.values():  # a shared link's own run, else the start-up step (ui/open_link.py)
            wire_open(demo, spec, views[spec.name], concurrency_id=ENGINE)
        fields = [views[name][n] for name in VIEWS for n in FIELDS[name]]
        demo.load(apply_link, None, [tabs, link_msg, *fields], api_visibility="private",
                  show_progress="hidden", concurrency_limit=None)  # a shared link fills the knobs
        def closed(request: gr.Request) -> None:
            expire_when_closed(demo, request)
        demo.unload(closed)
    demo.queue(default_concurrency_limit=engine_concurrency(), max_size=64)
    return demo


def expire_when_closed(demo: gr.Blocks, request: gr.Request) -> None:
    """A closed tab's engine sessions (their KV caches, the memory) are freed at once, and its Compare and Tune
    stop at their next engine step; its runs' text goes SPECSCOPE_STATE_TTL_S after it closed: Gradio keeps a
    closed session's state an hour whatever the state's own time-to-live says (its
    SessionState.STATE_TTL_WHEN_CLOSED; a test pins that this still reaches it on the pinned Gradio). A tab
    reopened within that time steps on: a run without its session rebuilds it from its snapshot."""
    for tab in ("compare", "tune"):
        JOBS.cancel(session_key(request, tab))
    holder = getattr(demo, "state_holder", None)
    state = holder.session_data.get(request.session_hash) if holder is not None else None
    if state is None:
        return
    for value in list(getattr(state, "state_data", {}).values()):
        if isinstance(value, Run):
            value.forget()
    if hasattr(state, "STATE_TTL_WHEN_CLOSED"):
        state.STATE_TTL_WHEN_CLOSED = min(state.STATE_TTL_WHEN_CLOSED, state_ttl_s())


if remote():  # ZeroGPU (or its emulation): weights load at import, before any worker is forked
    preload()


def warm_up() -> None:
    """Load the default models and compute the start-up preview steps while the page is already being
    served: the page opens with a real step drawn, and a visitor's first Step pays neither the load nor
    the first-call overheads."""
    PREVIEW.compute()
    if PREVIEW.error:
        print(f"warning: {PREVIEW.error}", flush=True)


def main() -> None:
    torch.set_num_threads(torch_threads())  # the cores shared by the engine calls that may run at once
    # show_error: our handlers already turn every error into one escaped line (ui/handlers.friendly); it lets
    # Gradio's own input checks (an API call with a wrong JSON type) name the input instead of a bare "Error".
    demo = build_demo()
    threading.Thread(target=warm_up, daemon=True).start()
    demo.launch(theme=THEME, css=CSS, head=HEAD, server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), show_error=True,
                state_session_capacity=state_capacity(), max_file_size=max_bytes(),
                app_kwargs={"middleware": [Middleware(DeepLinkGuard)]})


if __name__ == "__main__":
    main()
