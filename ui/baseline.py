"""The plain autoregressive (AR) baseline that every measured speed-up on the page divides by.

Why this shape: a baseline timed once per process and reused for every later prompt, method and visitor
is measured under other load, over other positions and sometimes cold, so the ratio says nothing. Here
AR decoding is timed for *this* prompt, model, device and sampling, over the same output positions the
run has committed, right after the run's own steps (so both see the same load on a shared CPU). Each AR
step is timed exactly like a run's step: wall time around the engine's `step()`, prefill taken out.
Timings are cached per (model, prompt, device, sampling, length) for a few minutes, and a visitor can
throw them away and measure again."""
from __future__ import annotations

import os
import statistics
import threading
import time
from collections import OrderedDict
from typing import Callable

from core.metrics import Baseline
from core.sampling import SamplingConfig
from ui.config import RunConfig
from ui.gpu import CHUNK, remote
from ui.models import device as device_name
from ui.run import Run

CAPACITY = 16  # prompts whose AR timings are kept (each keeps a small AR cache only while it is unfinished)


def max_age_s() -> float:
    """After this long a cached AR timing is measured again (the machine's load has moved on)."""
    value = os.environ.get("SPECSCOPE_BASELINE_MAX_AGE_S", "").strip()
    return float(value) if value.replace(".", "", 1).isdigit() else 600.0


class ARTimer:
    """Plain AR decoding of one prompt, advanced on demand to the positions a run has reached: a run of
    method "ar" stepped through the same engine calls as any run (ui/run.py), its step times kept."""

    def __init__(self, target_name: str, prompt: str | list[int], sampling: SamplingConfig, max_new_tokens: int):
        self.run = Run(RunConfig("ar", prompt, (), sampling.temperature, sampling.seed, max_new_tokens, target_name))
        self.token_ms: list[float] = []
        self.started = time.time()
        self.lock = threading.Lock()

    def advance(self, positions: int, check: Callable[[], None] | None = None) -> Baseline:
        """Time AR steps until `positions` output tokens exist (or AR ends), then a snapshot. `check` runs
        between engine calls (Compare and Tune stop there when cancelled)."""
        with self.lock:
            r = self.run
            while len(r.output_ids) < positions and not r.done:
                if check is not None:
                    check()
                before = len(r.traces)
                r.step(1 if not remote() else min(CHUNK, positions - len(r.output_ids)))
                for t, ms in zip(r.traces[before:], r.step_ms[before:]):
                    tau = max(1, t.tau)
                    self.token_ms += [ms / tau] * tau  # AR commits one token per step
            if r.done:
                r.forget()  # nothing more to time: free its engine session
            return self.snapshot()

    def snapshot(self) -> Baseline:
        age = time.time() - self.started
        note = (f"AR timed over {len(self.token_ms)} positions of this prompt on {self.run.device or device_name()}, "
                f"{age:.0f} s ago")
        return Baseline(list(self.run.output_ids), list(self.token_ms), self.run.done, note)


class BaselineCache:
    """ARTimers per (model, prompt, device, sampling, length), least recently used dropped first."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._timers: OrderedDict[tuple, ARTimer] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(target: str, prompt: str, temperature: float, seed: int, max_new_tokens: int) -> tuple:
        return (target, device_name(), prompt, float(temperature), int(seed), int(max_new_tokens))

    def timer(self, target: str, prompt: str, temperature: float, seed: int, max_new_tokens: int,
              fresh: bool = False) -> ARTimer:
        """The cached timer, or a new one when asked (re-measure), missing, or older than max_age_s()."""
        k = self.key(target, prompt, temperature, seed, max_new_tokens)
        with self._lock:
            t = self._timers.pop(k, None)
            if fresh or t is None or time.time() - t.started > max_age_s():
                t = ARTimer(target, prompt, SamplingConfig(temperature=temperature, seed=seed), max_new_tokens)
            self._timers[k] = t
            while len(self._timers) > self.capacity:
                self._timers.popitem(last=False)
            return t

    def recent_ms(self, target: str) -> float | None:
        """The median AR milliseconds per token over the cached timings of `target` (None if none yet)."""
        with self._lock:
            ms = [m for k, t in self._timers.items() if k[0] == target for m in t.token_ms]
        return statistics.median(ms) if ms else None

    def clear(self) -> None:
        with self._lock:
            self._timers.clear()


BASELINES = BaselineCache()


def full_ar_pass(target: str, prompt: str, sampling: SamplingConfig, max_new_tokens: int,
                 check: Callable[[], None] | None = None) -> ARTimer:
    """AR decoding of a prompt to its end, uncached (Compare and Tune time AR before and after their runs);
    the timer's snapshot() is the Baseline, its run the text."""
    t = ARTimer(target, prompt, sampling, max_new_tokens)
    t.advance(max_new_tokens, check)
    return t


def time_baseline(run: Run, fresh: bool = False) -> Baseline:
    """AR timed over the positions `run` has committed (one past its end once it has finished, to see whether
    AR stops there too), for its prompt, model and sampling, kept as run.base; `fresh` measures anew."""
    c = run.config
    timer = BASELINES.timer(c.target, c.prompt, c.temperature, c.seed, c.max_new_tokens, fresh)
    run.base = timer.advance(len(run.output_ids) + (1 if run.done else 0))
    return run.base
