"""Example prompts for the page, taken from the held-out prompt file (short ones first, so the page
opens on a prompt that steps quickly)."""
from __future__ import annotations

import functools

from core.prompts import ASSET_PROMPTS, read_prompts


@functools.lru_cache(maxsize=1)
def example_prompts(n: int = 8) -> tuple[str, ...]:
    rows = sorted(read_prompts(ASSET_PROMPTS), key=lambda r: len(r["prompt"]))
    return tuple(dict.fromkeys(r["prompt"] for r in rows))[:n]


def default_prompt() -> str:
    return example_prompts()[0]
