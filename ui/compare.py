"""Compare's runs (the tab: ui/compare_tab.py): one prompt through AR, chain, static, TALON and SpecBound, each to the
end, in rounds. Plain AR is timed before the methods and again after each round, and a second round runs the
methods in the reverse order (so no method always runs last, nearest a busy spell). The AR passes averaged per
output position *are* the AR row (so AR over itself is exactly 1.00×), and each method's speed-up pools its rounds'
steps against that average. Its range, in the table and as the bars' error bars, resamples the method's steps of
every round against one AR pass drawn at random (core/metrics.pooled_spread, as Tune's cells): the steps' noise,
the machine's drift across the whole run, and the rounds' differences, which one pass before and one after the
methods left out (two identical one-round runs gave chain 1.46× then 2.99×)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

from core.metrics import Baseline, mean_baseline, pooled_spread, run_stats
from ui.baseline import full_ar_pass
from ui.config import RunConfig
from ui.run import Run

COMPARE_METHODS = ("ar", "chain", "static", "talon", "talon@self", "specbound")  # method@drafter: that drafter
ROUNDS = 2  # the default: forward, then reverse order
MAX_ROUNDS = 3


def round_order(r: int) -> tuple[str, ...]:
    """The methods of round r (from 0): the even rounds in the table's order, the odd ones reversed."""
    methods = COMPARE_METHODS[1:]
    return methods if r % 2 == 0 else methods[::-1]


def parts(rounds: int = ROUNDS) -> list[str]:
    """compare()'s runs in order, named for the progress line."""
    out = ["plain AR (before the methods)"]
    for r in range(rounds):
        tag = f" (round {r + 1})" if rounds > 1 else ""
        out += [m + tag for m in round_order(r)] + [f"plain AR (after round {r + 1})" if rounds > 1
                                                    else "plain AR (after the methods)"]
    return out


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
        return ["No ranges yet: they come once plain AR has been timed again after the first round."]
    lo = {r.method: round(r.lo, 2) for r in ranged}  # the ends as the table shows them: a claim the table's own
    hi = {r.method: round(r.hi, 2) for r in ranged}  # numbers cannot carry (1.114 "above" 1.106, both 1.11) is none
    faster = [r.method for r in ranged if lo[r.method] > 1.0]
    slower = [r.method for r in ranged if hi[r.method] < 1.0]
    level = [r.method for r in ranged if lo[r.method] <= 1.0 <= hi[r.method]]
    said = []
    if faster:
        said.append(f"Faster than plain AR over their whole range: {', '.join(faster)}.")
    if slower:
        said.append(f"Slower than plain AR over their whole range: {', '.join(slower)}.")
    if level:
        said.append(f"Not told apart from plain AR by this run (the range spans 1.00×): {', '.join(level)}.")
    order = sorted(ranged, key=lambda r: -r.speedup)
    apart = [f"{a.method} > {b.method}" for a, b in zip(order, order[1:]) if lo[a.method] > hi[b.method]]
    tied = [f"{a.method} and {b.method}" for a, b in zip(order, order[1:]) if lo[a.method] <= hi[b.method]]
    if apart:
        said.append(f"Ranked by ranges that do not overlap: {'; '.join(apart)}.")
    if tied:
        said.append(f"Not ranked by this run (their ranges overlap): {'; '.join(tied)}.")
    said.append("The ranges cover the steps' noise, the rounds' differences and the machine's drift between the "
                "AR passes of this run; a busy machine can move a whole run more than that, so run Compare again "
                "before trusting a difference that one run alone shows.")
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


def method_row(runs: list[Run], base: Baseline, passes: list[Baseline] | None) -> CompareRow:
    """One method's rounds (the same prompt and knobs) as one row: the first round's text, MAT and δ over every
    round's steps, lossless only if every round equals AR, and the speed-up pooled over the rounds' steps with its
    range. `passes`: the AR passes so far when there are two or more (None: no range yet)."""
    first = runs[0]
    greedy = first.config.sampling.greedy
    stats = [run_stats(f.traces, f.step_ms, f.output_ids, greedy, base, True) for f in runs]
    traces = [t for f in runs for t in f.traces]
    steps = [([t.tau for t in f.traces], f.step_ms) for f in runs]  # one (τ per step, ms per step) per round
    spread = pooled_spread(steps, [[p] * len(runs) for p in passes]) if passes else None
    tokens, ms = sum(t.tau for t in traces), sum(sum(f.step_ms) for f in runs)
    mat = tokens / len(traces) if traces else 0.0
    mean_delta = sum(t.delta for t in traces) / len(traces) if traces else 0.0
    speedup = spread.value if spread is not None else stats[0].speedup
    ok = [s.lossless for s in stats]
    check = "n/a (sampling)" if ok[0] is None else "✓" if all(ok) else "✗"
    label = f"{first.config.method}@{first.config.drafter}" if first.config.drafter == "self" else first.config.method
    lo, hi = (None, None) if spread is None or spread.lo is None else (spread.lo, spread.hi)
    return CompareRow(label, first.output_text, mat, mean_delta, tokens / ms * 1000 if ms > 0 else 0.0, speedup,
                      check, lo=lo, hi=hi)


def compare(cfg: RunConfig, knobs: dict, check: Callable[[], None] | None = None,
            rounds: int = ROUNDS) -> Iterator[list[CompareRow]]:
    """Yields the table so far after each run (parts(rounds): AR before, then per round its methods and an AR
    pass); until the second AR pass, speed-ups are against the first alone (no range); the last table is the
    final one. `check` runs before every engine step and may raise to stop (Cancel)."""
    ar = full_ar_pass(cfg.target, cfg.prompt, cfg.sampling, cfg.max_new_tokens, check)
    passes = [ar.snapshot()]
    done: dict[str, list[Run] | CompareRow] = {}

    def table() -> list[CompareRow]:
        base, ranged = mean_baseline(passes), passes if len(passes) > 1 else None
        rows = [ar_row(base, ar.run.output_text)]
        for method in COMPARE_METHODS[1:]:
            got = done.get(method)
            if got is not None:
                rows.append(got if isinstance(got, CompareRow) else method_row(got, base, ranged))
        return rows

    yield table()
    for r in range(rounds):
        for method in round_order(r):
            if not isinstance(done.get(method), CompareRow):  # one that cannot run here is said once
                got = run_method(method, knobs, cfg, check)
                done[method] = got if isinstance(got, CompareRow) else [*done.get(method, []), got]
            yield table()
        passes.append(full_ar_pass(cfg.target, cfg.prompt, cfg.sampling, cfg.max_new_tokens, check).snapshot())
        yield table()
