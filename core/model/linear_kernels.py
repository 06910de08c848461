"""Which kernel computes y = x·Wᵀ + b on a CPU, chosen per row count T and measured on the machine that runs it.

Why: decoding multiplies a handful of rows by every weight matrix, and how fast a BLAS does that depends on the
argument order more than on T: `F.linear`, W·xᵀ (MKL's small-N path, which streams W once; given two rows,
since its one-column path is slower), oneDNN over a copy of W reordered once into its blocked layout, and the
same with fewer than four rows padded to four (in bf16 its one-row path was slower than four rows) each win
at some T on one machine, and machines disagree about which (docs/app.md, "Measurements behind the code"). So
the choice is measured where the model runs, not assumed: `measure_plan` times each kernel over the model's own
products in forward order (so weights stream from memory as in decoding) at T = 1–6 and a few larger ones, and
keeps F.linear wherever nothing else is clearly faster.

A draft head or an exit head uses its target's plan (`install`, `planned`): it runs between the target's forwards,
which push its weights out of the cache, so a plan timed on the head alone (its weights in cache) ranks the kernels
as decoding never sees them; in paired runs the target's plan was the faster one.

Every kernel computes the same products; they differ from one another in the order of the sums (the last bits),
as one T differs from another under any kernel, so greedy equality with plain decoding is kept exactly the way it
is for any batch shape (the tests' near-tie rule). A plan is fixed for a process (and stored for a day beside
the cost curves), so a run is deterministic.
"""
from __future__ import annotations

import bisect
import logging
import os
import statistics
import time
from dataclasses import dataclass
from typing import Iterable

import torch
import torch.nn.functional as F

from core.model import cost_cache
from core.paths import cache_home

log = logging.getLogger("specscope")

LINEAR, NARROW, PACKED, PADDED = "linear", "narrow", "packed", "padded"
KERNELS = (LINEAR, NARROW, PACKED, PADDED)
PAD_ROWS = 4  # PADDED: fewer rows are padded with zeros to this many (oneDNN's bf16 path was faster at 4 rows than 1)
SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64)
MAX_ROWS = 4096  # a plan names kernels for at most this many rows (ours stop at SIZES[-1]); a larger one is not ours  # row counts timed; a T between two uses the lower one's kernel
MARGIN = 0.05  # another kernel replaces F.linear only where it is at least this much faster
MIN_MB = 4.0  # smaller models keep F.linear everywhere: their products cost less than choosing would
MEASURE_MB = 64.0  # the products timed: the model's first ones up to this size (past any CPU's cache)
ENV = "SPECSCOPE_LINEAR"  # auto (measure) | linear | narrow | packed | padded (one kernel at every T)
PACK_ENV = "SPECSCOPE_LINEAR_PACK_MAX_MB"  # packed copies double a model's weights: only below this size
PACK_MAX_MB = 2048.0
PLANNED_DTYPES = (torch.float32, torch.bfloat16)  # fp16 on a CPU has no fast kernel worth choosing among
_MEMO: dict[str, "LinearPlan"] = {}  # signature -> plan, for the process


def packed_available() -> bool:
    """oneDNN's linear over a prepacked weight is an internal op of CPU builds with MKL-DNN (what torch.compile's
    CPU backend uses); a build without it simply never offers the kernel."""
    return (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


@dataclass(frozen=True)
class LinearPlan:
    """kernels[i] serves T in [sizes[i], sizes[i + 1]); the last serves every larger T."""
    sizes: tuple[int, ...]
    kernels: tuple[str, ...]

    def __post_init__(self) -> None:  # the kernel for every T up to the last size, read on every product call
        sizes, kernels = self.sizes, self.kernels
        if (not isinstance(sizes, tuple) or not isinstance(kernels, tuple) or not sizes or len(sizes) != len(kernels)
                or any(type(t) is not int for t in sizes) or sizes[0] != 1 or sizes[-1] > MAX_ROWS
                or any(a >= b for a, b in zip(sizes, sizes[1:])) or any(k not in KERNELS for k in kernels)):
            raise ValueError(f"not a kernel plan: sizes {sizes!r}, kernels {kernels!r}")
        by_rows = tuple(self.kernels[max(0, bisect.bisect_right(self.sizes, t) - 1)]
                        for t in range(self.sizes[-1] + 1))
        object.__setattr__(self, "_by_rows", by_rows)

    def kernel(self, rows: int) -> str:
        by_rows = self._by_rows  # type: ignore[attr-defined]
        return by_rows[rows] if rows < len(by_rows) else by_rows[-1]

    def describe(self) -> str:
        """'T 1–2: narrow · 3+: packed': the plan in one line, for logs and the bench's header."""
        parts, starts = [], [i for i, k in enumerate(self.kernels) if i == 0 or k != self.kernels[i - 1]]
        for n, i in enumerate(starts):
            lo = self.sizes[i]
            hi = self.sizes[starts[n + 1]] - 1 if n + 1 < len(starts) else None
            parts.append(f"{lo}{'+' if hi is None else '' if hi == lo else f'–{hi}'}: {self.kernels[i]}")
        return "T " + " · ".join(parts)

    def to_dict(self) -> dict:
        return {"sizes": list(self.sizes), "kernels": list(self.kernels)}


PLAIN = LinearPlan((1,), (LINEAR,))


def narrow(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """(W·xᵀ)ᵀ for x (T, in), W (out, in) row-major -> (T, out). One row is doubled: the one-column product
    takes BLAS's matrix-vector path, which was slower here than two columns."""
    one = x.shape[0] == 1
    y = torch.mm(w, (torch.cat([x, x]) if one else x).t())  # (out, T or 2): x transposed as a view
    y = (y[:, :1] if one else y).t().contiguous()  # (T, out)
    return y if b is None else y.add_(b)


def weight_version(w: torch.Tensor) -> tuple[int, int]:
    """What changes when a weight's storage or contents do: a copy derived from it is stale once this moves
    (inference tensors keep no version count)."""
    return w.data_ptr(), -1 if w.is_inference() else w._version


class Product:
    """y = x·Wᵀ + b through its plan's kernel for x's row count; F.linear while autograd records (training) or
    where the plan has no say (another device or dtype). W (out, in) must be row-major; the packed copy is made
    on first use and again whenever W's storage or contents change."""

    __slots__ = ("w", "b", "plan", "_packed", "_packed_of")

    def __init__(self, w: torch.Tensor, b: torch.Tensor | None, plan: LinearPlan = PLAIN) -> None:
        self.w, self.b, self.plan = w, b, plan
        self._packed: torch.Tensor | None = None
        self._packed_of: tuple[int, int] = (0, -1)

    def packed(self) -> torch.Tensor:
        """oneDNN's blocked copy of W (kept until W changes)."""
        of = weight_version(self.w)
        if self._packed is None or of != self._packed_of:
            with torch.inference_mode():
                self._packed = torch.ops.mkldnn._reorder_linear_weight(self.w.detach().contiguous(), 16)
            self._packed_of = of
        return self._packed

    def run(self, kernel: str, x: torch.Tensor) -> torch.Tensor:
        """x (T, in) -> (T, out) through `kernel`."""
        if kernel == NARROW:
            return narrow(x, self.w, self.b)
        if kernel in (PACKED, PADDED):
            T = x.shape[0]
            if kernel == PADDED and T < PAD_ROWS:
                x = torch.cat([x, x.new_zeros(PAD_ROWS - T, x.shape[1])])  # (PAD_ROWS, in)
            return torch.ops.mkldnn._linear_pointwise(x, self.packed(), self.b, "none", [], "")[:T]
        return F.linear(x, self.w, self.b)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x (…, in) -> (…, out)."""
        if self.plan is PLAIN or (torch.is_grad_enabled() and (x.requires_grad or self.w.requires_grad)):
            return F.linear(x, self.w, self.b)
        if x.dim() != 2:
            return self(x.reshape(-1, x.shape[-1])).view(*x.shape[:-1], -1)
        return self.run(self.plan.kernel(x.shape[0]), x)


def planned(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, plan: LinearPlan) -> torch.Tensor:
    """x (T, in)·Wᵀ + b for a weight without a Product of its own (a row slice, e.g. an exit head's first V_exit
    rows): the plan's kernel where it needs no packed copy, else F.linear."""
    kernel = plan.kernel(x.shape[0])
    if kernel == NARROW and not torch.is_grad_enabled() and w.stride(-1) == 1:
        return narrow(x, w, b)
    return F.linear(x, w, b)


def install(module: torch.nn.Module, plan: LinearPlan) -> None:
    """Every nn.Linear under `module` computes through `plan` (its forward replaced by a Product over its own
    weight and bias); with PLAIN, torch's own forward again."""
    for lin in module.modules():
        if isinstance(lin, torch.nn.Linear):
            current = lin.__dict__.get("forward")
            if plan is PLAIN:
                lin.__dict__.pop("forward", None)
            elif isinstance(current, _LinearForward):  # a head shared by many drafters keeps its packed copies
                current.product.plan = plan
            else:
                lin.forward = _LinearForward(lin, plan)


class _LinearForward:
    """An nn.Linear's forward through a plan, reading the module's weight at each call (it may be replaced)."""

    def __init__(self, lin: torch.nn.Linear, plan: LinearPlan) -> None:
        self.lin, self.product = lin, Product(lin.weight, lin.bias, plan)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        p, lin = self.product, self.lin
        if p.w is not lin.weight or p.b is not lin.bias:
            p.w, p.b = lin.weight, lin.bias
        return p(x)


def _weights_mb(products: Iterable[Product]) -> float:
    return sum(p.w.numel() * p.w.element_size() for p in products) / 2 ** 20


def candidates(products: list[Product]) -> tuple[str, ...]:
    """The kernels worth timing for these products on this build: packed only where oneDNN is there and the
    copies fit under SPECSCOPE_LINEAR_PACK_MAX_MB."""
    try:
        pack_max = float(os.environ.get(PACK_ENV, "") or PACK_MAX_MB)
    except ValueError:
        pack_max = PACK_MAX_MB
    pack = packed_available() and _weights_mb(products) <= pack_max
    return tuple(k for k in KERNELS if k not in (PACKED, PADDED) or pack)


@torch.inference_mode()
def measure_plan(products: list[Product], kernels: tuple[str, ...] = KERNELS, sizes: tuple[int, ...] = SIZES,
                 reps: int = 3) -> tuple[LinearPlan, dict[str, list[float]]]:
    """Time each kernel over `products` in order (one pass streams their weights, as a forward does), at each
    row count, kernels interleaved rep by rep so drift hits them alike; the median per (kernel, T). Returns the
    plan and the milliseconds behind it ({kernel: ms per size})."""
    widths = {p.w.shape[1] for p in products}
    ms: dict[str, list[float]] = {k: [] for k in kernels}
    for p in products if {PACKED, PADDED} & set(kernels) else ():
        p.packed()
    for t in sizes:
        xs = {n: torch.randn(t, n, dtype=products[0].w.dtype) for n in widths}
        times: dict[str, list[float]] = {k: [] for k in kernels}
        for k in kernels:  # warm: the first call of a shape allocates
            for p in products:
                p.run(k, xs[p.w.shape[1]])
        for _ in range(reps):
            for k in kernels:
                t0 = time.perf_counter()
                for p in products:
                    p.run(k, xs[p.w.shape[1]])
                times[k].append((time.perf_counter() - t0) * 1000)
        for k in kernels:
            ms[k].append(statistics.median(times[k]))
    return fastest_plan(ms, sizes), ms


def fastest_plan(ms: dict[str, list[float]], sizes: tuple[int, ...]) -> LinearPlan:
    """At each size the fastest kernel, where it beats F.linear by MARGIN (a few per cent is noise, and F.linear
    is what every other program runs)."""
    chosen = []
    for i in range(len(sizes)):
        best = min(ms, key=lambda k: ms[k][i])
        chosen.append(best if ms[best][i] < (1 - MARGIN) * ms[LINEAR][i] else LINEAR)
    return LinearPlan(tuple(sizes), tuple(chosen))


def forced_plan(value: str) -> LinearPlan | None:
    """SPECSCOPE_LINEAR's value as a plan: one kernel everywhere; None for auto (or empty)."""
    value = value.strip().lower()
    if value in ("", "auto"):
        return None
    if value not in KERNELS:
        raise ValueError(f"{ENV} must be auto, {', '.join(KERNELS)} (got {value!r})")
    if value in (PACKED, PADDED) and not packed_available():
        raise ValueError(f"{ENV}={value} needs a torch build with oneDNN (MKL-DNN), which this one lacks")
    return PLAIN if value == LINEAR else LinearPlan((1,), (value,))


def plan_for(products: list[Product], device: torch.device, signature: str) -> LinearPlan:
    """The plan a model's products use: PLAIN off the CPU, outside fp32 and bf16 and for small models;
    SPECSCOPE_LINEAR when it names a kernel; else measured (about a second on the embedded target), kept on disk for a day
    keyed by the machine and `signature` (the products' shapes), and in memory for the process."""
    forced = forced_plan(os.environ.get(ENV, ""))
    if forced is not None:
        return forced
    if (device.type != "cpu" or not products or products[0].w.dtype not in PLANNED_DTYPES
            or _weights_mb(products) < MIN_MB):
        return PLAIN
    key = f"linear-plan|{signature}"
    if key in _MEMO:
        return _MEMO[key]
    machine = cost_cache.fingerprint("cpu")
    path = cost_cache.path_for(cache_home(), key)
    stored = cost_cache.load(path, machine)
    if stored is not None:
        try:
            plan = LinearPlan(tuple(stored["sizes"]), tuple(stored["kernels"]))  # checked field by field
            _MEMO[key] = plan
            return plan
        except (KeyError, TypeError, ValueError):
            log.info("ignoring a stored kernel plan that is not one of ours (%s); measuring again", path)
    sample, mb = [], 0.0
    for p in products:
        sample.append(p)
        mb += _weights_mb([p])
        if mb >= MEASURE_MB:
            break
    plan, ms = measure_plan(sample, candidates(products))
    log.info("linear kernels for %s on this CPU: %s", signature, plan.describe())
    _MEMO[key] = plan
    cost_cache.save(path, {**plan.to_dict(), "ms": ms, "fingerprint": machine, "measured_at": time.time(),
                           "key": key})
    return plan


def describe_ms(ms: dict[str, list[float]], sizes: tuple[int, ...] = SIZES) -> str:
    """The measured table as markdown rows (kernel × T, ms), for cli output and the benchmark notes."""
    head = "| kernel | " + " | ".join(f"T = {t}" for t in sizes) + " |"
    rule = "|---|" + "---|" * len(sizes)
    rows = [f"| {k} | " + " | ".join(f"{v:.2f}" for v in ms[k]) + " |" for k in ms]
    return "\n".join([head, rule, *rows])

