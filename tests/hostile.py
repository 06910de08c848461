"""What the hostile-input tests share: real exports of each stepping view, and ways to plant a payload in
them (every free-text field at once, or one field of any kind at a time)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from ui import handlers as h
from ui.view_specs import VIEWS

from tests.handler_helpers import sb_step, step

PAYLOAD = '<img src=x onerror="window.__xss=1">'
FREE_TEXT = {"text", "top_texts", "unchecked_top_texts", "committed_texts", "prompt_text", "output_text",
             "prompt"}  # + auto's reason


def talon_export(steps: int = 3, **kw) -> dict:
    """A real TALON run's export, with the static tree of its last step (and auto's record when asked)."""
    run = None
    for _ in range(steps):
        run = step(run, **kw)["run"]
    h.extras(VIEWS["talon"], run=run)
    return json.loads(json.dumps(run.export()))


def specbound_export(steps: int = 3) -> dict:
    """A SpecBound run at its own defaults' thresholds, so its steps draft tokens (and exit records)."""
    run = None
    for _ in range(steps):
        run = sb_step(run, alpha=0.5, tau_exit=0.1, d_max=4)["run"]
    return json.loads(json.dumps(run.export()))


def plant_text(data, payload: str = PAYLOAD):
    """Every free-text string of the export replaced by (or, in lists, every entry set to) the payload."""
    if isinstance(data, dict):
        if "predicted" in data:  # auto's record: its reason is a line of free text
            data = {**data, "reason": payload}
        return {k: (payload if k in FREE_TEXT and isinstance(v, str) else
                    [payload] * len(v) if k in FREE_TEXT and isinstance(v, list) else plant_text(v, payload))
                for k, v in data.items()}
    if isinstance(data, list):
        return [plant_text(x, payload) for x in data]
    return data


def leaf_paths(data, path=()):
    """Every scalar inside the first step (and its first record of each list): where one payload goes."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from leaf_paths(v, path + (k,))
    elif isinstance(data, list):
        if data:
            yield from leaf_paths(data[0], path + (0,))
    elif data is not None:
        yield path


def planted_at(data: dict, path: tuple, payload=PAYLOAD) -> dict:
    out = copy.deepcopy(data)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = payload
    return out


def write(tmp: Path, name: str, data) -> str:
    p = tmp / name
    p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(p)


def markup_in(value) -> list[str]:
    """Raw tags of the payload kind anywhere in a handler's outputs (HTML strings, figures, nested data)."""
    if hasattr(value, "to_plotly_json"):
        value = json.dumps(value.to_plotly_json(), default=str)
    if isinstance(value, dict):
        return [m for v in value.values() for m in markup_in(v)]
    if isinstance(value, (list, tuple)):
        return [m for v in value for m in markup_in(v)]
    text = str(value).lower()
    return [tag for tag in ("<img", "<script", "<svg", "<iframe") if tag in text]
