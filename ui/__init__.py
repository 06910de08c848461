"""App-side glue between the engine (core/) and the Gradio page (app.py): runs, knobs, views, handlers."""
