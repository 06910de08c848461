"""Bounded memory for the server. A session's state is its committed text, knobs and traces; the engine's
KV caches are a rebuildable acceleration. So only the most recently stepped sessions keep caches (LRU,
SPECSCOPE_CACHED_SESSIONS); an evicted session re-prefills from its committed text on its next Step and
continues exactly where it was. Gradio state gets a time-to-live and a session capacity, and prompts a
character cap checked before the tokenizer sees them."""
from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import Any, Protocol

from core.prompts import max_prompt_chars


class HasSession(Protocol):
    session: Any
    lock: threading.Lock


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


def drop_caches(session: Any) -> None:
    """Free a session's caches; its next step rebuilds them from the committed text (an imported trace
    has no session)."""
    if session is None:
        return
    drop = getattr(session, "drop_caches", None)
    if drop is not None:
        drop()
        return
    session.tcache = None
    if hasattr(session, "dcache"):
        session.dcache = None


class CacheLRU:
    """Runs that hold caches, least recently stepped first. Weak references: a run that Gradio forgets
    (time-to-live, capacity, closed tab) leaves by itself."""

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = capacity
        self._runs: OrderedDict[int, weakref.ref] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self._capacity if self._capacity is not None else cached_sessions()

    def __len__(self) -> int:
        with self._lock:
            return sum(ref() is not None for ref in self._runs.values())

    def touch(self, run: HasSession) -> list[HasSession]:
        """Mark `run` as just stepped (its caller holds its lock) and drop the caches of the least recently
        stepped runs beyond capacity. A run that is stepping right now is skipped, never disturbed.
        Returns the runs whose caches were dropped."""
        evicted: list[HasSession] = []
        with self._lock:
            self._runs.pop(id(run), None)
            self._runs[id(run)] = weakref.ref(run)
            for key, ref in list(self._runs.items()):
                if len(self._runs) <= self.capacity:
                    break
                other = ref()
                if other is None:
                    del self._runs[key]
                elif other is not run and other.lock.acquire(blocking=False):
                    try:
                        drop_caches(other.session)
                    finally:
                        other.lock.release()
                    del self._runs[key]
                    evicted.append(other)
        return evicted

    def forget(self, run: HasSession | None) -> None:
        """gr.State's delete_callback: the run is gone, free its caches now rather than at garbage collection."""
        if run is None:
            return
        with self._lock:
            self._runs.pop(id(run), None)
        if run.lock.acquire(blocking=False):
            try:
                drop_caches(run.session)
            finally:
                run.lock.release()


CACHES = CacheLRU()
