"""Run statistics from traces and step timings: MAT, mean δ, tokens/s, measured c, modelled
R = τ/(1+cδ) and the measured speed-up over plain decoding, with where each number comes from."""
from __future__ import annotations

from dataclasses import dataclass

from core.trace import StepTrace


@dataclass
class Baseline:
    """Plain autoregressive decoding of the same prompt with the same sampling settings."""
    output_ids: list[int]
    wall_s: float  # generate() after the prompt's prefill (decoding only, like the run's tokens/s)
    ms_per_forward: float  # T_p: mean target forward for one token (AR step verify time)

    @property
    def tok_s(self) -> float:
        return len(self.output_ids) / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class RunStats:
    steps: int
    tokens: int
    mat: float  # mean τ
    mean_delta: float  # mean δ
    tok_s: float
    c: float | None  # T_q / T_p measured in this run
    R: float | None  # modelled speed-up τ / (1 + c·δ)
    speedup: float | None  # measured tokens/s over the AR baseline's
    lossless: bool | None  # greedy only: output equals the AR baseline's prefix
    lossless_note: str
    c_note: str


def draft_ms_per_forward(traces: list[StepTrace]) -> float | None:
    forwards = sum(t.delta for t in traces)
    return sum(t.draft_ms for t in traces) / forwards if forwards else None


def lossless_check(output_ids: list[int], baseline: Baseline | None, greedy: bool, finished: bool) -> tuple[bool | None, str]:
    if not greedy:
        return None, "sampling run: losslessness is distributional (tested statistically), not token-for-token"
    if baseline is None:
        return None, "no plain-decoding baseline yet"
    ref = baseline.output_ids[:len(output_ids)]
    for i, (a, b) in enumerate(zip(output_ids, ref)):
        if a != b:
            return False, f"differs from plain decoding at output token {i + 1}"
    if len(ref) < len(output_ids) or (finished and len(output_ids) != len(baseline.output_ids)):
        return False, f"length differs from plain decoding ({len(output_ids)} vs {len(baseline.output_ids)} tokens)"
    return True, f"output equals plain greedy decoding ({len(output_ids)} tokens compared)"


def run_stats(traces: list[StepTrace], step_ms: list[float], output_ids: list[int], greedy: bool,
              baseline: Baseline | None, finished: bool = False, prefill_ms: float = 0.0) -> RunStats:
    """step_ms: wall time of each step() call; the prompt's prefill (inside the first) is taken out."""
    steps = len(traces)
    tokens = sum(t.tau for t in traces)
    mat = tokens / steps if steps else 0.0
    mean_delta = sum(t.delta for t in traces) / steps if steps else 0.0
    total_s = (sum(step_ms) - prefill_ms) / 1000
    tok_s = tokens / total_s if total_s > 0 else 0.0
    tq = draft_ms_per_forward(traces)
    c = c_note = None
    if tq is None:
        c, c_note = 0.0, "no draft forwards in this run, so c·δ = 0"
    elif baseline is not None and baseline.ms_per_forward > 0:
        c = tq / baseline.ms_per_forward
        c_note = (f"c = T_q/T_p = {tq:.2f} ms per draft forward (this run) / "
                  f"{baseline.ms_per_forward:.2f} ms per target forward (AR baseline)")
    else:
        c_note = "c needs the AR baseline's target forward time"
    R = mat / (1 + c * mean_delta) if c is not None and steps else None
    speedup = tok_s / baseline.tok_s if baseline is not None and baseline.tok_s > 0 and tok_s > 0 else None
    ok, note = lossless_check(output_ids, baseline, greedy, finished)
    return RunStats(steps, tokens, mat, mean_delta, tok_s, c, R, speedup, ok, note, c_note or "")
