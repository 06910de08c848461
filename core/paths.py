"""The one place SpecScope keeps what it computes and may compute again: measured cost curves, exit heads
trained for Hub models, training scratch folders. One home, outside the source tree (a read-only install or
a Space's app folder must still work): $SPECSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/specscope, else
~/.cache/specscope."""
from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """The cache folder (not created here: a reader of a missing file needs none)."""
    own = os.environ.get("SPECSCOPE_CACHE_DIR", "").strip()
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "specscope"
