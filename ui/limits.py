"""Bounded memory and fair sharing for the server, as operator settings. A session's state is its committed
text, knobs and traces; the engine's KV caches are a rebuildable acceleration, so only the most recently
stepped sessions keep caches (SPECSCOPE_CACHED_SESSIONS; ui/worker.py); an evicted session re-prefills from
its committed text on its next Step and continues exactly where it was. Gradio state gets a time-to-live and a
session capacity, prompts a character cap checked before the tokenizer sees them, and engine calls a share
of the cores."""
from __future__ import annotations

import os

from core.prompts import max_prompt_chars


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() else default


def engine_concurrency() -> int:
    """Interactive engine calls (Step, Play, redraws) served at once (SPECSCOPE_CONCURRENCY, default 2)."""
    return max(1, env_int("SPECSCOPE_CONCURRENCY", 2))


def torch_threads(cores: int | None = None) -> int:
    """torch's intra-op threads per engine call (SPECSCOPE_TORCH_THREADS): the cores shared by the calls that
    may run at once, so two calls on a 2-core machine never run four busy threads."""
    cores = cores or os.cpu_count() or 1
    return max(1, env_int("SPECSCOPE_TORCH_THREADS", cores // engine_concurrency()))


def cached_sessions() -> int:
    """How many sessions keep their caches (each holds target + draft caches sized to its reach)."""
    return max(1, env_int("SPECSCOPE_CACHED_SESSIONS", 8))


def state_ttl_s() -> int:
    """Seconds a visitor's run is kept after its last update (gr.State time_to_live)."""
    return env_int("SPECSCOPE_STATE_TTL_S", 3600)


def state_capacity() -> int:
    """Sessions whose state Gradio keeps at most (oldest dropped first; Gradio's default is 10,000)."""
    return env_int("SPECSCOPE_STATE_SESSIONS", 500)


def prompt_char_limit() -> int:
    """Characters a prompt typed into the page may have (the embedded model's context is 1024 tokens)."""
    return max_prompt_chars(1024)
