"""Compare tab: one prompt through AR, chain, static, TALON and SpecBound, each to the end. Plain AR is
timed immediately before and again after the other methods and averaged per output position; that
average *is* the AR row (so AR over itself is exactly 1.00×), and each method's speed-up is AR's time
over its own for the same positions, with the range given by the before and after passes alone."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from core.engine import Session
from ui.baseline import full_ar_pass, merged, timed_step
from ui.models import get_models
from ui.run import RunConfig, build
from core.metrics import Baseline, measured_speedup, run_stats

COMPARE_METHODS = ("ar", "chain", "static", "talon", "specbound")
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
    lo: float | None = None  # speed-up against the AR pass before / after alone (the spread)
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


def ar_row(base: Baseline, text: str) -> CompareRow:
    """The baseline itself: τ = 1, δ = 0, and a speed-up of exactly 1 by definition."""
    return CompareRow("ar", text, 1.0, 0.0, base.tok_s, 1.0, "reference", note="")


@dataclass
class Finished:
    """One method run to the end, timed step by step, waiting for the AR passes around it."""
    method: str
    session: Session
    step_ms: list[float]


def run_method(method: str, knobs: dict, cfg: RunConfig,
               check: Callable[[], None] | None = None) -> Finished | CompareRow:
    """Generate to the end with one method; a method missing from this build gives a row saying so.
    `check` runs before each step (a cancelled Compare stops there)."""
    try:
        m = build(method, knobs)
        target, draft = get_models(cfg.target, cfg.draft, m.needs_draft, cfg.drafter)
    except ValueError as exc:
        return CompareRow(method, "", None, None, None, None, "—", note=str(exc))
    s = Session(target, m, cfg.prompt, cfg.sampling, cfg.max_new_tokens, draft)
    step_ms = []
    while not s.done:
        if check is not None:
            check()
        step_ms.append(timed_step(s))
    return Finished(method, s, step_ms)


def method_row(f: Finished, base: Baseline, passes: tuple[Baseline, Baseline] | None) -> CompareRow:
    """`passes`: the AR passes before and after, for the range; None while the pass after is pending."""
    s = f.session
    st = run_stats(s.traces, f.step_ms, s.output_ids, s.sampling.greedy, base, True)
    taus = [t.tau for t in s.traces]
    ends = [measured_speedup(taus, f.step_ms, p) for p in passes or ()]
    lo = hi = None
    if ends and all(e is not None for e in ends):
        lo, hi = min(e.value for e in ends), max(e.value for e in ends)
    check = "n/a (sampling)" if st.lossless is None else "✓" if st.lossless else "✗"
    return CompareRow(f.method, s.target.tokenizer.decode(s.output_ids), st.mat, st.mean_delta, st.tok_s,
                      st.speedup, check, lo=lo, hi=hi)


def compare(cfg: RunConfig, knobs: dict, check: Callable[[], None] | None = None) -> Iterator[list[CompareRow]]:
    """Yields the table so far after each run (AR before, each method, AR after: PARTS): until the AR pass
    after the methods, speed-ups are against the pass before alone (no range); the last table is the final
    one. `check` runs before every engine step and may raise to stop (Cancel)."""
    before = full_ar_pass(cfg.target, cfg.prompt, cfg.sampling, cfg.max_new_tokens, check)
    target, _ = get_models(cfg.target, cfg.draft, False)
    done: list[Finished | CompareRow] = []

    def table(base: Baseline, passes: tuple[Baseline, Baseline] | None) -> list[CompareRow]:
        rows = [ar_row(base, target.tokenizer.decode(base.output_ids))]
        return rows + [f if isinstance(f, CompareRow) else method_row(f, base, passes) for f in done]

    yield table(before, None)
    for method in COMPARE_METHODS[1:]:
        done.append(run_method(method, knobs, cfg, check))
        yield table(before, None)
    after = full_ar_pass(cfg.target, cfg.prompt, cfg.sampling, cfg.max_new_tokens, check)
    yield table(merged(before, after), (before, after))
