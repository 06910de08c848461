"""Compare's runs (the tab: ui/compare_tab.py): one prompt through AR, chain, static, TALON and SpecBound, each to the
end. Plain AR is timed immediately before and again after the other methods and averaged per output position; that
average *is* the AR row (so AR over itself is exactly 1.00×), and each method's speed-up is AR's time over its own
for the same positions. Its range, in the table and as the bars' error bars, resamples the method's steps against
either AR pass (core/metrics.pooled_spread, as Tune's cells): the steps' noise and the machine's drift between the
passes."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

from core.metrics import Baseline, mean_baseline, pooled_spread, run_stats
from ui.baseline import full_ar_pass
from ui.config import RunConfig
from ui.run import Run

COMPARE_METHODS = ("ar", "chain", "static", "talon", "talon@self", "specbound")  # method@drafter: that drafter
PARTS = ["plain AR (before the methods)", *COMPARE_METHODS[1:], "plain AR (after the methods)"]  # compare()'s runs


@dataclass
class CompareRow:
    method: str
    text: str
    mat: float | None
    mean_delta: float | None
    tok_s: float | None
    speedup: float | None
    lossless: str
    note: str = ""
    lo: float | None = None  # the speed-up's range: 10th-90th percentile over resampled steps and AR passes
    hi: float | None = None

    def speedup_text(self) -> str:
        if self.speedup is None:
            return "—"
        if self.lo is None:
            return f"{self.speedup:.2f}×"
        return f"{self.speedup:.2f}× ({self.lo:.2f}–{self.hi:.2f})"

    def as_row(self) -> list:
        f = lambda v, spec: "—" if v is None else format(v, spec)  # noqa: E731
        return [self.method, f(self.mat, ".2f"), f(self.mean_delta, ".2f"), f(self.tok_s, ".1f"),
                self.speedup_text(), self.lossless, self.note or self.text]


def conclusions(rows: list[CompareRow]) -> list[str]:
    """What this run's ranges support, in sentences: which methods beat plain AR over their whole range, which
    cannot be told from it, and which orderings between methods hold (ranges apart) or do not (ranges overlap).
    Why: two identical runs on a shared machine gave chain 1.46× then 2.99×; a ranking the ranges cannot
    carry must say so rather than be read as a finding."""
    ranged = [r for r in rows if r.method != "ar" and r.speedup is not None and r.lo is not None]
    if not ranged:
        return ["No ranges yet: they come once plain AR has been timed again after the methods."]
    faster = [r.method for r in ranged if r.lo > 1.0]
    slower = [r.method for r in ranged if r.hi < 1.0]
    level = [r.method for r in ranged if r.lo <= 1.0 <= r.hi]
    said = []
    if faster:
        said.append(f"Faster than plain AR over their whole range: {', '.join(faster)}.")
    if slower:
        said.append(f"Slower than plain AR over their whole range: {', '.join(slower)}.")
    if level:
        said.append(f"Not told apart from plain AR by this run (the range spans 1.00×): {', '.join(level)}.")
    order = sorted(ranged, key=lambda r: -r.speedup)
    apart = [f"{a.method} > {b.method}" for a, b in zip(order, order[1:]) if a.lo > b.hi]
    tied = [f"{a.method} and {b.method}" for a, b in zip(order, order[1:]) if a.lo <= b.hi]
    if apart:
        said.append(f"Ranked by ranges that do not overlap: {'; '.join(apart)}.")
    if tied:
        said.append(f"Not ranked by this run (their ranges overlap): {'; '.join(tied)}.")
    said.append("The ranges cover the steps' noise and the machine's drift between the two AR passes; a busy "
                "machine can move a whole run more than that, so run Compare again before trusting a difference "
                "that one run alone shows.")
    return said


def ar_row(base: Baseline, text: str) -> CompareRow:
    """The baseline itself: τ = 1, δ = 0, and a speed-up of exactly 1 by definition."""
    return CompareRow("ar", text, 1.0, 0.0, base.tok_s, 1.0, "reference", note="")


def run_method(method: str, knobs: dict, cfg: RunConfig,
               check: Callable[[], None] | None = None) -> Run | CompareRow:
    """Generate to the end with one method; a method that cannot run here gives a row saying so.
    `check` runs between engine calls (a cancelled Compare stops there)."""
    name, _, drafter = method.partition("@")
    m_cfg = replace(cfg, method=name, knobs=tuple(knobs.items()), drafter=drafter or cfg.drafter)
    try:
        run = Run(m_cfg).to_end(check)
    except ValueError as exc:  # an unknown method or a drafter that does not fit: say so in its row
        return CompareRow(method, "", None, None, None, None, "—", note=str(exc))
    run.forget()
    return run


def method_row(f: Run, base: Baseline, passes: tuple[Baseline, Baseline] | None) -> CompareRow:
    """`passes`: the AR passes before and after, for the range; None while the pass after is pending."""
    st = run_stats(f.traces, f.step_ms, f.output_ids, f.config.sampling.greedy, base, True)
    spread = pooled_spread([([t.tau for t in f.traces], f.step_ms)], [[p] for p in passes or ()])
    lo, hi = (None, None) if spread is None else (spread.lo, spread.hi)
    check = "n/a (sampling)" if st.lossless is None else "✓" if st.lossless else "✗"
    label = f"{f.config.method}@{f.config.drafter}" if f.config.drafter == "self" else f.config.method
    return CompareRow(label, f.output_text, st.mat, st.mean_delta, st.tok_s, st.speedup, check, lo=lo, hi=hi)


def compare(cfg: RunConfig, knobs: dict, check: Callable[[], None] | None = None) -> Iterator[list[CompareRow]]:
    """Yields the table so far after each run (AR before, each method, AR after: PARTS): until the AR pass
    after the methods, speed-ups are against the pass before alone (no range); the last table is the final
    one. `check` runs before every engine step and may raise to stop (Cancel)."""
    ar = full_ar_pass(cfg.target, cfg.prompt, cfg.sampling, cfg.max_new_tokens, check)
    before = ar.snapshot()
    done: list[Run | CompareRow] = []

    def table(base: Baseline, passes: tuple[Baseline, Baseline] | None) -> list[CompareRow]:
        rows = [ar_row(base, ar.run.output_text)]
        return rows + [f if isinstance(f, CompareRow) else method_row(f, base, passes) for f in done]

    yield table(before, None)
    for method in COMPARE_METHODS[1:]:
        done.append(run_method(method, knobs, cfg, check))
        yield table(before, None)
    after = full_ar_pass(cfg.target, cfg.prompt, cfg.sampling, cfg.max_new_tokens, check).snapshot()
    yield table(mean_baseline([before, after]), (before, after))
