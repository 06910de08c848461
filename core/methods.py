"""Name -> decoding method. The CLI, the benchmark and the app build methods only through here."""
from __future__ import annotations

from core.ar import ARMethod
from core.engine import Method

METHODS = ("ar", "chain", "static", "talon", "specbound")


def build_method(name: str, **knobs) -> Method:
    """Build a method from its knobs (the CLI's names, underscored); unknown knobs are ignored so one
    namespace of knobs can build any method. Raises ValueError with a user-facing message."""
    if name == "ar":
        return ARMethod()
    if name in ("chain", "static", "talon"):
        from core.trees.method import build_tree_method
        return build_tree_method(name, **knobs)
    if name == "specbound":
        from core.specbound.method import build_specbound_method
        return build_specbound_method(**knobs)
    raise ValueError(f"unknown method '{name}' (choose from {', '.join(METHODS)})")
