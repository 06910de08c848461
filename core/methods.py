"""Name -> decoding method. The CLI, the benchmark and the app build methods only through here."""
from __future__ import annotations

from core.chain import ARMethod, ChainMethod
from core.engine import Method

METHODS = ("ar", "chain")


def build_method(name: str, gamma: int = 5) -> Method:
    """Raise ValueError with a user-facing message on an unknown name or a bad knob."""
    if name == "ar":
        return ARMethod()
    if name == "chain":
        return ChainMethod(gamma=gamma)
    raise ValueError(f"unknown method '{name}' (choose from {', '.join(METHODS)})")
