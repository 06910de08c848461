"""What a step costs on this machine: t_verify(n), the target's forward over n new tokens, and
t_draft(width), one drafter forward over a frontier of that width — measured, not assumed.

On a CPU a forward costs about linearly in its tokens, so small trees win; on a GPU a 60-token forward
costs about what a 1-token one does, so large trees pay. The curves are measured once per (device,
model, dtype, drafter) over a realistic cache length, stored with the numbers they came from (in
memory and as JSON in the cache home, core/paths.py; both expire: core/model/cost_cache.py), and read
piecewise-linearly. A point that a busy machine inflated (it costs more than a larger forward, or rises
faster than linearly in n) is timed again; a curve that still does not rise with n is flagged, shown as such
and never written to disk.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np
import torch

from core.draft_tree import DraftTree
from core.drafters.contract import Drafter
from core.model import cost_cache
from core.model.causal_lm import CausalLM
from core.paths import cache_home
from core.trace import ROOT

VERIFY_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
DRAFT_WIDTHS = (1, 2, 4, 8, 16, 32)
CONTEXT = 256  # cached tokens the timed forwards attend to
MAX_N = 4096  # no curve of ours times more rows than this; a stored one that does is not ours
CACHE_DIR = cache_home()
_MEMO: dict[str, "CostModel"] = {}  # the machine's curves, shared read-only like the weights; they expire
OUTLIER = 1.25  # a forward timed this much above a larger forward was slowed by load (a quiet CPU's spread is well inside it)
STEEPER = 1.5  # ... or rising this much faster than linearly in n from the size before it
RETRIES = 2  # extra timings of a suspect point; the fastest median stands (load only ever adds time)
NOISE_MS = 1.0  # ... and only by more than this: a sub-millisecond forward jitters by more than OUTLIER
log = logging.getLogger("specscope")


@dataclass
class CostModel:
    key: str  # device | model | dtype | drafter
    verify_n: list[int]
    verify_ms: list[float]
    draft_width: list[int]
    draft_ms: list[float]
    measured_at: float = 0.0  # time.time() of the measurement
    fingerprint: str = ""  # the machine it was measured on (core/model/cost_cache.fingerprint)
    retimed: list[int] = field(default_factory=list)  # verify sizes timed again as outliers
    flag: str = ""  # why this curve is not trusted (it does not rise with n even after re-timing); "" when fine

    def __post_init__(self) -> None:
        """A curve read back from disk is checked field by field: a file that only looks like one is measured again."""
        def sizes_ok(xs) -> bool:
            return (isinstance(xs, list) and all(type(x) is int and 0 < x <= MAX_N for x in xs)
                    and all(a < b for a, b in zip(xs, xs[1:])))

        def times_ok(xs, n: int) -> bool:
            return (isinstance(xs, list) and len(xs) == n
                    and all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 for x in xs))
        if not (isinstance(self.key, str) and sizes_ok(self.verify_n) and self.verify_n
                and times_ok(self.verify_ms, len(self.verify_n)) and sizes_ok(self.draft_width)
                and times_ok(self.draft_ms, len(self.draft_width)) and isinstance(self.flag, str)
                and isinstance(self.retimed, list) and isinstance(self.measured_at, (int, float))):
            raise ValueError("not a cost curve")

    def t_verify(self, n: float) -> float:
        """Milliseconds of one target forward over n new tokens (pending + tree nodes), read on the
        curve's monotone envelope: a measured dip (t(12) > t(16) happens on a CPU) is timing noise, and
        a model that believed it would prefer the larger forward."""
        return float(np.interp(n, self.verify_n, self._verify_env))

    def t_draft(self, width: float) -> float:
        """Milliseconds of one drafter forward over a frontier of `width` nodes (0 for a model-free drafter),
        on the monotone envelope like t_verify."""
        return float(np.interp(width, self.draft_width, self._draft_env)) if self.draft_width else 0.0

    @cached_property
    def _verify_env(self) -> np.ndarray:
        return monotone(self.verify_ms)

    @cached_property
    def _draft_env(self) -> np.ndarray:
        return monotone(self.draft_ms)

    @property
    def c(self) -> float:
        """The papers' c: one drafter forward (one node) over one target forward (one token); 0 for a
        drafter that runs no model."""
        return self.t_draft(1) / self.t_verify(1) if self.draft_ms else 0.0

    def c_over(self, widths: dict[int, int]) -> float:
        """c as a run paid it: the mean over the draft forwards it ran ({frontier width: forwards}) of
        t_draft(width) / t_verify(1). A tree level is many nodes wide and costs more than one node; the
        one-node c would make the modelled R = τ/(1 + cδ) optimistic."""
        n = sum(widths.values())
        if not self.draft_ms:
            return 0.0
        if not n:
            return self.c
        return sum(k * self.t_draft(w) for w, k in widths.items()) / n / self.t_verify(1)

    def to_dict(self) -> dict:
        return asdict(self)


def monotone(ms: list[float]) -> np.ndarray:
    """Each point lowered to the cheapest measurement at or after it: non-decreasing in size."""
    return np.minimum.accumulate(np.asarray(ms, dtype=float)[::-1])[::-1]


def median_ms(fn, reps: int) -> float:
    """Median wall milliseconds of `fn` over `reps` calls after one warm-up call (CUDA synchronised)."""
    fn()  # warm
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000)
    return sorted(times)[len(times) // 2]


def _fitting(target: CausalLM) -> tuple[list[int], list[int], int]:
    """(token ids, verify sizes, context) that fit the target: ids inside its vocabulary, the cached context
    plus the largest forward inside its context window (a small model measures fewer sizes)."""
    sizes = [n for n in VERIFY_SIZES if n <= target.max_context // 2] or [1]
    context = max(1, min(CONTEXT, target.max_context - max(sizes) - max(DRAFT_WIDTHS) - 8))
    ids = [10 + i % max(1, target.vocab_size - 10) for i in range(max(context, max(sizes)))]
    return ids, sizes, context


@dataclass
class VerifyCurve:
    sizes: list[int]
    ms: list[float]
    retimed: list[int]  # sizes timed again as outliers


def outliers(sizes: list[int], ms: list[float]) -> list[int]:
    """Indices whose time no forward can have on a quiet machine: above a larger forward's time by OUTLIER,
    or rising faster than linearly in n from the size before by STEEPER (either by more than NOISE_MS)."""
    out = []
    for i, t in enumerate(ms):
        larger = min(ms[i + 1:], default=float("inf"))
        linear = ms[i - 1] * sizes[i] / sizes[i - 1] if i else float("inf")
        if t > max(OUTLIER * larger, larger + NOISE_MS) or t > max(STEEPER * linear, linear + NOISE_MS):
            out.append(i)
    return out


def not_rising(sizes: list[int], ms: list[float]) -> str:
    """Why the curve is not a cost curve ('' when it rises with n, within OUTLIER)."""
    for i, t in enumerate(ms):
        j = min(range(i + 1, len(ms)), key=lambda k: ms[k], default=None)
        if j is not None and t > max(OUTLIER * ms[j], ms[j] + NOISE_MS):
            return (f"t_verify({sizes[i]}) = {t:.1f} ms is above t_verify({sizes[j]}) = {ms[j]:.1f} ms even after "
                    f"re-timing: the machine was busy; re-measure when it is quiet (this curve is not kept on disk)")
    return ""


@torch.inference_mode()
def _verify_curve(target: CausalLM, reps: int) -> VerifyCurve:
    """t_verify at every size that fits, then each outlier timed again (RETRIES times, the fastest kept)."""
    ctx, sizes, context = _fitting(target)
    cache = target.new_cache(context + max(sizes) + 1)
    target.forward(ctx[:context], range(context), cache)

    def time_n(n: int) -> float:
        def run() -> None:
            cache.rollback(context)
            target.forward(ctx[:n], range(context, context + n), cache)
        return median_ms(run, reps)

    ms = [time_n(n) for n in sizes]
    retimed: list[int] = []
    for _ in range(RETRIES):
        suspects = outliers(sizes, ms)
        for i in suspects:
            ms[i] = min(ms[i], time_n(sizes[i]))
        retimed += [sizes[i] for i in suspects if sizes[i] not in retimed]
    return VerifyCurve(sizes, ms, retimed)


@torch.inference_mode()
def _draft_curve(target: CausalLM, drafter: Drafter, reps: int) -> tuple[list[int], list[float]]:
    """One drafter forward over `width` depth-0 siblings, after a root proposal over the context."""
    ids, _, context = _fitting(target)
    ids = ids[:context]
    room = context + max(DRAFT_WIDTHS) + 8  # the widest frontier fits after the context
    head = ids[:-1]  # prefilled as a session does: the last token is fed by the next step
    feats = target.forward(head, range(len(head)), target.new_cache(room), taps=drafter.taps).taps
    drafter.prefill(ids, feats, room)
    if not drafter.runs_model:
        return [], []
    drafter.begin(ids)
    drafter.propose([ROOT], DraftTree())
    mark = drafter.mark()
    out = []
    for w in DRAFT_WIDTHS:
        tree = DraftTree()
        for i in range(w):
            tree.add(10 + i, ROOT, 1.0 / w, 1.0 / w)

        def run() -> None:
            drafter.rewind(mark)
            drafter.propose(list(range(w)), tree)
        out.append(median_ms(run, reps))
    return list(DRAFT_WIDTHS), out


def measure_costs(target: CausalLM, drafter: Drafter, reps: int = 9, use_disk: bool = True,
            progress: Callable[[str], None] | None = None, fresh: bool = False) -> CostModel:
    """The cost model for this machine, model and drafter kind: from memory, disk, or measured now (on a
    fresh drafter of the same kind: the caller's is left alone), saying so first through `progress` (else
    the log): a measurement takes seconds, so programs call this at load time, before anything is timed.
    A kept curve serves while it is younger than a day, from this machine and under the same kernel plan (a
    curve timed through other kernels prices every width wrongly); `fresh` measures anew."""
    key = f"{target.device}|{target.name}|{target.dtype}|{target.plan.describe()}|{drafter.identity}"
    machine = cost_cache.fingerprint(str(target.device))
    known = None if fresh else _MEMO.get(key)
    if known is not None and cost_cache.fresh_enough(known.to_dict(), machine):
        return known
    path = cost_cache.path_for(CACHE_DIR, key)
    stored = cost_cache.load(path, machine) if use_disk and not fresh else None
    if stored is not None:
        try:
            _MEMO[key] = CostModel(**stored)
            return _MEMO[key]
        except (TypeError, ValueError):  # a file of another shape, or values no measurement gives: measure
            pass
    (progress or log.info)(f"measuring this machine's cost curves ({target.device}, {target.name}, drafter "
                           f"{drafter.name}): a few seconds")
    widths, draft_ms = _draft_curve(target, drafter.fresh(), reps)
    curve = _verify_curve(target, reps)
    model = CostModel(key, curve.sizes, curve.ms, widths, draft_ms, time.time(), machine, curve.retimed,
                      not_rising(curve.sizes, curve.ms))
    _MEMO[key] = model
    if use_disk and not model.flag:
        cost_cache.save(path, model.to_dict())
    return model
