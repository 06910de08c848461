"""Who goes first on the engine: a visitor's Step, Play tick or redraw before anyone's long job.

Why: Compare, Tune and the cost curve run hundreds of engine steps; if they held the engine for their whole
run, a Step queued behind two of them waited minutes. They run in their own queue group instead, and before
each of their engine steps they wait while any interactive call is running, so a Step shares the machine
with at most one step of a long job. A long job is never starved for good: it waits at most `max_wait_s`
for any one interactive call, once. A call that runs longer (the AR baseline over a long run, a cost curve
measured after a Step) then shares the machine with the job's steps instead of costing `max_wait_s` before
every one of them: at that rate a Compare of 64 tokens took minutes for its first AR pass."""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Callable, Iterator


class EngineGate:
    """The interactive engine calls in flight, each with its own number; long jobs step only when there are
    none they have not already waited out."""

    def __init__(self, max_wait_s: float = 5.0) -> None:
        self.max_wait_s = max_wait_s
        self._inflight: set[int] = set()
        self._count = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def interactive(self) -> Iterator[None]:
        with self._cond:
            self._count += 1
            call = self._count
            self._inflight.add(call)
        try:
            yield
        finally:
            with self._cond:
                self._inflight.discard(call)
                self._cond.notify_all()

    def wait_turn(self, waited: set[int] | None = None) -> bool:
        """A long job's step may start: True when no interactive call is running that it has to wait for (False:
        it waited its most). `waited`: the job's own record of the calls it waited its most for, updated here;
        it does not wait for those again. Without it every call is waited for, at most `max_wait_s`."""
        waited = set() if waited is None else waited
        with self._cond:
            clear = self._cond.wait_for(lambda: self._inflight <= waited, timeout=self.max_wait_s)
            if not clear:
                waited |= self._inflight
            waited &= self._inflight  # the ones that ended need no record
            return clear

    @property
    def busy(self) -> int:
        return len(self._inflight)


GATE = EngineGate()


def interactive(fn: Callable) -> Callable:
    """Mark a handler as interactive: long jobs pause their engine steps while it runs."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with GATE.interactive():
            return fn(*args, **kwargs)
    return wrapper
