"""Pure renderers: trace records (core.trace dataclasses or their dicts) -> Plotly figures or HTML.

Nothing here imports torch or gradio, so every view can be drawn (and tested) without a model."""
