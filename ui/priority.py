"""Who goes first on the engine: a visitor's Step, Play tick or redraw before anyone's long job.

Why: Compare, Tune and the cost curve run hundreds of engine steps; if they held the engine for their whole
run, a Step queued behind two of them waited minutes. They run in their own queue group instead, and before
each of their engine steps they wait while any interactive call is running, so a Step shares the machine
with at most one step of a long job. A long job is never starved for good: it waits at most `max_wait_s`
per step, then takes its turn."""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Callable, Iterator


class EngineGate:
    """Counts the interactive engine calls in flight; long jobs step only when there are none."""

    def __init__(self, max_wait_s: float = 5.0) -> None:
        self.max_wait_s = max_wait_s
        self._busy = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def interactive(self) -> Iterator[None]:
        with self._cond:
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    def wait_turn(self) -> bool:
        """A long job's step may start: True when no interactive call is running (False: it waited its most)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, timeout=self.max_wait_s)

    @property
    def busy(self) -> int:
        return self._busy


GATE = EngineGate()


def interactive(fn: Callable) -> Callable:
    """Mark a handler as interactive: long jobs pause their engine steps while it runs."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with GATE.interactive():
            return fn(*args, **kwargs)
    return wrapper
