"""Wiring handlers by name: Gradio calls a handler with its inputs in order and wants its outputs in order;
our handlers take and return values by name, so adding a knob to a view never shifts another's position."""
from __future__ import annotations

import inspect

import gradio as gr


def named(fn, inputs: tuple[str, ...], outputs: tuple[str, ...], c: dict) -> dict:
    """The .click / .change arguments that call `fn(**{name: value})` with the components `c[name]` of
    `inputs` and put its returned {name: value} into `outputs`. A name the handler leaves out is left as it
    is on the page. A handler with a `request` parameter gets the visitor's gr.Request (Cancel finds its run
    by it)."""
    wants_request = "request" in inspect.signature(fn).parameters

    def ordered(update: dict):
        values = tuple(update.get(n, gr.skip()) for n in outputs)
        return values[0] if len(values) == 1 else values  # Gradio takes one output bare

    def kwargs(values: tuple, request: gr.Request | None) -> dict:
        return {**dict(zip(inputs, values)), **({"request": request} if wants_request else {})}

    if inspect.isgeneratorfunction(fn):
        def call(request: gr.Request, *values):
            for update in fn(**kwargs(values, request)):
                yield ordered(update)
    else:
        def call(request: gr.Request, *values):
            return ordered(fn(**kwargs(values, request)))
    call.__name__ = getattr(fn, "__name__", "handler")
    return dict(fn=call, inputs=[c[n] for n in inputs], outputs=[c[n] for n in outputs])
