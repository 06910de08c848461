"""What a step costs on this machine: t_verify(n), the target's forward over n new tokens, and
t_draft(width), one drafter forward over a frontier of that width — measured, not assumed.

On a CPU a forward costs about linearly in its tokens, so small trees win; on a GPU a 60-token forward
costs about what a 1-token one does, so large trees pay. The curves are measured once per (device,
model, dtype, drafter) over a realistic cache length, stored with the numbers they came from (in
memory and as JSON under ~/.cache/specscope), and read piecewise-linearly.
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from core.drafters import Drafter
from core.model import CausalLM
from core.trace import ROOT
from core.draft_tree import DraftTree

VERIFY_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
DRAFT_WIDTHS = (1, 2, 4, 8, 16, 32)
CONTEXT = 256  # cached tokens the timed forwards attend to
CACHE_DIR = Path.home() / ".cache" / "specscope"
_MEMO: dict[str, "CostModel"] = {}  # measured once per process: the machine's, shared read-only like the weights
log = logging.getLogger("specscope")


@dataclass
class CostModel:
    key: str  # device | model | dtype | drafter
    verify_n: list[int]
    verify_ms: list[float]
    draft_width: list[int]
    draft_ms: list[float]

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


@torch.inference_mode()
def _verify_curve(target: CausalLM, reps: int) -> tuple[list[int], list[float]]:
    ctx, sizes, context = _fitting(target)
    cache = target.new_cache(context + max(sizes) + 1)
    target.forward(ctx[:context], range(context), cache)
    out = []
    for n in sizes:
        def run() -> None:
            cache.rollback(context)
            target.forward(ctx[:n], range(context, context + n), cache)
        out.append(median_ms(run, reps))
    return sizes, out


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


def measure(target: CausalLM, drafter: Drafter, reps: int = 9, use_disk: bool = True,
            progress: Callable[[str], None] | None = None) -> CostModel:
    """The cost model for this machine, model and drafter kind: from memory, disk, or measured now (on a
    fresh drafter of the same kind: the caller's is left alone), saying so first through `progress` (else
    the log): a measurement takes seconds, so programs call this at load time, before anything is timed."""
    key = f"{target.device}|{target.name}|{target.dtype}|{drafter.identity}"
    if key in _MEMO:
        return _MEMO[key]
    path = CACHE_DIR / f"cost-{hashlib.sha1(key.encode()).hexdigest()[:16]}.json"
    if use_disk and path.is_file():
        try:
            _MEMO[key] = CostModel(**json.loads(path.read_text()))
            return _MEMO[key]
        except (TypeError, ValueError):
            pass
    (progress or log.info)(f"measuring this machine's cost curves ({target.device}, {target.name}, drafter "
                           f"{drafter.name}): a few seconds, once")
    widths, draft_ms = _draft_curve(target, drafter.fresh(), reps)
    model = CostModel(key, *_verify_curve(target, reps), widths, draft_ms)
    _MEMO[key] = model
    if use_disk:
        try:
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(model.to_dict()))
        except OSError:
            pass  # a read-only home: the in-memory copy still serves this process
    return model
