"""Compare tab: one prompt through AR, chain, static, TALON and SpecBound, each to the end, measured in
one go so the speed-ups share one AR baseline."""
from __future__ import annotations

import time
from dataclasses import dataclass

from core.engine import Session
from ui.models import get_models
from ui.run import RunConfig, baseline_for, build
from viz.stats import run_stats

COMPARE_METHODS = ("ar", "chain", "static", "talon", "specbound")


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

    def as_row(self) -> list:
        f = lambda v, spec: "—" if v is None else format(v, spec)  # noqa: E731
        return [self.method, f(self.mat, ".2f"), f(self.mean_delta, ".2f"), f(self.tok_s, ".1f"),
                f(self.speedup, ".2f"), self.lossless, self.note or self.text]


def run_method(method: str, knobs: dict, cfg: RunConfig) -> CompareRow:
    """Generate to the end with one method; a method missing from this build gives a row saying so."""
    try:
        m = build(method, knobs)
        target, draft = get_models(cfg.target, cfg.draft, m.needs_draft)
    except ValueError as exc:
        return CompareRow(method, "", None, None, None, None, "—", note=str(exc))
    s = Session(target, m, cfg.prompt, cfg.sampling, cfg.max_new_tokens, draft)
    step_ms = []
    while not s.done:
        t0 = time.perf_counter()
        s.step()
        step_ms.append((time.perf_counter() - t0) * 1000)
    base = baseline_for(cfg.target, cfg.prompt, cfg.temperature, cfg.seed, cfg.max_new_tokens)
    st = run_stats(s.traces, step_ms, s.output_ids, cfg.sampling.greedy, base, True, s.prefill_ms)
    check = "n/a (sampling)" if st.lossless is None else "✓" if st.lossless else "✗"
    return CompareRow(method, target.tokenizer.decode(s.output_ids), st.mat, st.mean_delta, st.tok_s,
                      st.speedup, check)


def compare(cfg: RunConfig, knobs: dict, progress=None) -> list[CompareRow]:
    rows = []
    for i, method in enumerate(COMPARE_METHODS):
        if progress is not None:
            progress((i, len(COMPARE_METHODS)), desc=f"running {method}")
        rows.append(run_method(method, knobs, cfg))
    return rows
