"""Optional Hugging Face Spaces GPU support: `spaces.GPU` where the package exists, a no-op elsewhere."""
from __future__ import annotations

from typing import Callable

try:
    import spaces
except ImportError:
    spaces = None


def gpu(fn: Callable) -> Callable:
    return spaces.GPU(fn) if spaces is not None else fn
