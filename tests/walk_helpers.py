"""What the walk tests share: reading a quoted number's field path (viz/walk.py) in an exported step, and
checking a number as the page shows it against that field."""
from __future__ import annotations

import math


def resolve(step: dict, shadow: dict | None, path: str):
    """The value a walk's field path names: 'levels.1.anchor', 'nodes#' (a length), 'levels.9:12.kept' (a sum
    over a slice), 'shadow.tau' (the static tree from the same prefix)."""
    if path.startswith("shadow."):
        return resolve(shadow, None, path[len("shadow."):])
    return walk(step, path.split("."))


def walk(value, keys: list[str]):
    if not keys or value is None:  # a knob the record does not carry reads as none, as the page shows it
        return value
    key, rest = keys[0], keys[1:]
    if key.endswith("#"):
        return len(value[key[:-1]])
    if ":" in key:
        a, b = (int(x) for x in key.split(":"))
        return sum(walk(item, rest) for item in value[a:b])
    if isinstance(value, list):
        return walk(value[int(key)], rest)
    return walk(value.get(key), rest)


def shown_matches(shown: str, value, spec: str) -> bool:
    """The page's text for a number equals the trace value in the quote's format ('—' for none)."""
    if value is None:
        return shown == "—"
    if isinstance(value, float) and math.isnan(value):
        return shown == "nan"
    return shown == format(value, spec)
