"""Every number the project reports about a run, computed in one place: MAT, mean δ, tokens/s, c,
modelled R = τ/(1+cδ), the measured speed-up over plain decoding, the share of steps on or above the
Oracle line τ ≥ δ, and the calibration Σp(u)/accepted. The bench, the tuners, the app's stats and its
Tune tab all read these; viz/ only renders them. Plain Python (no torch), so a renderer can import it.

The app's speed-up compares like with like: the run's decoding time for the output positions it has
committed against plain AR's time for the *same* positions of the same prompt (prefill taken out of
both), and its spread comes from resampling the run's steps, because one shared CPU is noisy."""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

from core.eagle3.readout import PositionTally
from core.trace import StepTrace

RESAMPLES = 200  # bootstrap draws for the speed-up's spread (seeded: the same run shows the same spread)


def modelled_r(mat: float, c: float, mean_delta: float) -> float:
    """The papers' speed-up model R = τ / (1 + c·δ): MAT over the cost of a step in target forwards."""
    return mat / (1 + c * mean_delta)


def speedup(ar_s: float, method_s: float) -> float:
    """Wall-clock speed-up over plain decoding on the same work (AR's time over the method's)."""
    return ar_s / method_s if method_s > 0 else 0.0


@dataclass
class Totals:
    """Sums over a set of runs (one method, several prompts), and the ratios read from them."""
    tokens: int = 0
    steps: int = 0
    draft_forwards: float = 0  # Σ δ (SpecBound: layer equivalents / L, a fraction)
    wall_s: float = 0.0
    accepted: int = 0  # drafted tokens accepted, over all steps
    score_sum: float = 0.0  # Σ p(u) of every verified tree: the drafter's own estimate of `accepted`
    c: float = 0.0  # cost of one draft forward over one target forward, measured
    costed: tuple[float, float] = (0.0, 0.0)  # Σ costed_parts over the runs that had them: the modelled R's parts
    points: list[tuple[float, int]] = field(default_factory=list)  # (δ, τ) per step
    widths: dict[int, int] = field(default_factory=dict)  # draft forwards run, by frontier width (trees, chains)

    def add(self, traces: list[StepTrace], tokens: int, wall_s: float) -> None:
        """One run's traces (its committed tokens and wall time given apart: EOS/length cuts)."""
        self.tokens += tokens
        self.steps += len(traces)
        self.draft_forwards += sum(t.delta for t in traces)
        self.wall_s += wall_s
        self.accepted += sum(t.accepted for t in traces)
        self.score_sum += sum(t.score_sum or 0.0 for t in traces)
        self.points += [(t.delta, t.tau) for t in traces]
        for level in (lv for t in traces for lv in t.levels):
            self.widths[level.frontier] = self.widths.get(level.frontier, 0) + 1

    @property
    def mat(self) -> float:
        return self.tokens / max(1, self.steps)

    @property
    def mean_delta(self) -> float:
        return self.draft_forwards / max(1, self.steps)

    @property
    def tok_s(self) -> float:
        return self.tokens / max(1e-9, self.wall_s)

    @property
    def oracle_share(self) -> float:
        """Share of steps on or above the Oracle line τ = δ (every draft forward paid for itself)."""
        return sum(tau >= delta for delta, tau in self.points) / max(1, len(self.points))

    @property
    def calibration(self) -> float:
        """Σ p(u) / accepted: 1 when the drafter's q is calibrated, above 1 when it is over-confident."""
        return self.score_sum / self.accepted if self.accepted else 0.0

    @property
    def modelled_r(self) -> float:
        return modelled_r(self.mat, self.c, self.mean_delta) if self.steps else 0.0

    def add_costed(self, parts: tuple[float, float] | None) -> None:
        if parts is not None:
            self.costed = (self.costed[0] + parts[0], self.costed[1] + parts[1])

    @property
    def costed_r(self) -> float | None:
        """The speed-up modelled with measured costs (costed_parts), pooled over the runs."""
        return self.costed[0] / self.costed[1] if self.costed[1] > 0 else None


@dataclass
class Baseline:
    """Plain AR decoding of the same prompt, model, device and sampling: one token per step, each step
    timed around the engine call exactly like the run's steps, prefill taken out."""
    output_ids: list[int]
    token_ms: list[float]  # wall ms of the AR step that produced output position i
    done: bool = False  # AR ended by itself (end-of-text or length) after output_ids
    note: str = ""  # when and how it was measured, for the page

    @property
    def ms_per_forward(self) -> float:
        """T_p: the median AR step (one target forward), robust to a stray slow step."""
        return statistics.median(self.token_ms) if self.token_ms else 0.0

    def ms_for(self, start: int, stop: int) -> float | None:
        """AR time for output positions [start, stop); None if AR has not measured them all."""
        return sum(self.token_ms[start:stop]) if stop <= len(self.token_ms) else None

    @property
    def tok_s(self) -> float:
        total = sum(self.token_ms)
        return 1000 * len(self.token_ms) / total if total > 0 else 0.0


@dataclass
class Speedup:
    value: float  # AR ms over run ms, same positions
    lo: float | None  # 10th and 90th percentiles over resampled steps (None: too few steps)
    hi: float | None
    positions: int  # output positions compared


@dataclass
class RunStats:
    steps: int
    tokens: int
    mat: float  # mean τ
    mean_delta: float  # mean δ
    tok_s: float
    c: float | None  # T_q / T_p measured in this run
    R: float | None  # modelled speed-up τ / (1 + c·δ)
    speedup: float | None  # measured: AR time over run time for the same output positions
    lossless: bool | None  # greedy only: output equals the AR baseline's prefix
    lossless_note: str
    c_note: str
    spread: Speedup | None = None
    base_note: str = ""
    R_curve: float | None = None  # R with this machine's measured costs (curve_r): trees' ms, SpecBound's layers
    timed_here: bool = True  # False for an imported trace: its timings were taken elsewhere


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
    if len(ref) < len(output_ids) and baseline.done:
        return False, f"length differs from plain decoding ({len(output_ids)} vs {len(baseline.output_ids)} tokens)"
    if finished and len(baseline.output_ids) > len(output_ids):
        return False, f"plain decoding goes on past this run's end ({len(output_ids)} tokens)"
    if len(ref) < len(output_ids):
        return None, "plain decoding has not reached this run's last token yet"
    return True, f"output equals plain greedy decoding ({len(output_ids)} tokens compared)"


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


MIN_RESAMPLED = 3  # steps below which resampling them says nothing


def step_pairs(taus: list[int], step_ms: list[float], baseline: Baseline) -> list[tuple[float, float]]:
    """(run ms, AR ms) per step over the same output positions, up to where AR has timed them all."""
    pairs, start = [], 0
    for tau, ms in zip(taus, step_ms):
        ar = baseline.ms_for(start, start + tau)
        if ar is None or ms <= 0:
            break
        pairs.append((ms, ar))
        start += tau
    return pairs


def _ratio(pairs: list[tuple[float, float]]) -> float:
    return sum(p[1] for p in pairs) / max(1e-9, sum(p[0] for p in pairs))


def bootstrap(groups: list[list], stat) -> tuple[float, float] | None:
    """10th and 90th percentiles of `stat` over RESAMPLES draws (seeded: the same run shows the same range),
    each draw picking one of `groups` at random and resampling its items with replacement; None when a group
    has fewer than MIN_RESAMPLED items."""
    if not groups or min(len(g) for g in groups) < MIN_RESAMPLED:
        return None
    rng = random.Random(0)
    values = []
    for _ in range(RESAMPLES):
        g = groups[rng.randrange(len(groups))]
        values.append(stat([g[rng.randrange(len(g))] for _ in g]))
    return _percentile(values, 0.1), _percentile(values, 0.9)


def measured_speedup(taus: list[int], step_ms: list[float], baseline: Baseline | None) -> Speedup | None:
    """AR time over run time for the output positions both have timed; the spread resamples steps."""
    if baseline is None:
        return None
    pairs = step_pairs(taus, step_ms, baseline)
    if not pairs:
        return None
    spread = bootstrap([pairs], _ratio)
    return Speedup(_ratio(pairs), *(spread or (None, None)), sum(taus[:len(pairs)]))


def pooled_spread(runs: list[tuple[list[int], list[float]]], passes: list[list[Baseline]]) -> Speedup | None:
    """Several prompts' runs of one setting (each prompt's per-step τ and decoding ms) against AR timed in one
    or more passes (each pass a Baseline per prompt, e.g. before and after a grid). The value pools every
    prompt's steps against the passes averaged per position. The range is the 10th-90th percentile over
    resamplings of the steps, each draw against one pass drawn at random, so it covers both the steps' noise
    and the machine's drift between the passes; with too few steps to resample, it runs between the passes
    alone (none with one pass)."""
    if not passes or not runs:
        return None

    def pairs(bases: list[Baseline]) -> list[tuple[float, float]]:
        return [pair for (taus, ms), base in zip(runs, bases) for pair in step_pairs(taus, ms, base)]

    mean = [mean_baseline([p[i] for p in passes]) for i in range(len(runs))]
    pooled, per_pass = pairs(mean), [pairs(bases) for bases in passes]
    if not pooled:
        return None
    positions = sum(sum(taus[:len(step_pairs(taus, ms, b))]) for (taus, ms), b in zip(runs, mean))
    spread = bootstrap(per_pass, _ratio)
    if spread is None and len(passes) > 1 and all(per_pass):
        ends = [_ratio(p) for p in per_pass]
        spread = min(ends), max(ends)
    return Speedup(_ratio(pooled), *(spread or (None, None)), positions)


def mean_baseline(passes: list[Baseline]) -> Baseline:
    """AR passes over the same positions, averaged per position (as far as every pass reached)."""
    n = min(len(b.token_ms) for b in passes)
    ms = [sum(b.token_ms[i] for b in passes) / len(passes) for i in range(n)]
    first = passes[0]
    return Baseline(first.output_ids[:n], ms, first.done and len(first.output_ids) == n,
                    "AR timed before and after, averaged" if len(passes) > 1 else first.note)


def costed_parts(traces: list[StepTrace], cost) -> tuple[float, float] | None:
    """(what AR would pay for the committed tokens, what the steps cost) in one unit, the modelled speed-up being
    their ratio. Trees and chains: ms off this machine's cost curve (a core.auto.cost_model.CostModel), each
    verification as t_verify(nodes + 1) and each draft forward as t_draft(its frontier), AR t_verify(1) per
    token. SpecBound: decoder layers over one token, as its trace measures them (layer_parts). None where
    neither is known."""
    if not traces:
        return None
    if all(t.specbound is not None for t in traces):
        return layer_parts(traces)
    if cost is None or any(t.tree is None for t in traces):
        return None
    spent = 0.0
    for t in traces:
        widths = [lv.frontier for lv in t.levels] or [1] * round(t.delta)  # chains record no levels
        spent += cost.t_verify(len(t.nodes) + 1) + sum(cost.t_draft(w) for w in widths)
    return sum(t.tau for t in traces) * cost.t_verify(1), spent


def layer_parts(traces: list[StepTrace]) -> tuple[float, float] | None:
    """SpecBound's steps costed in decoder layers over one token: the layers drafted, the exit checks, the
    layers the verification ran (it resumes where drafting stopped: not a whole forward) and the final head λ
    once, against AR's L + λ per committed token. A layer pass over a block's few rows is taken to cost one
    row's (on a CPU the weights' reading dominates). The papers' R = τ/(1 + δ) charges every verification a
    whole forward and leaves λ out of both sides, which on a narrow model with a big vocabulary underrates it.
    None for traces without the measured λ (older exports)."""
    parts = [t.specbound for t in traces]
    if any(p is None or p.final_head_layers <= 0 for p in parts):
        return None
    spent = sum(p.layers_equivalent + p.final_head_layers for p in parts)
    ar = sum(t.tau * (p.num_layers + p.final_head_layers) for t, p in zip(traces, parts))
    return ar, spent


def curve_r(traces: list[StepTrace], cost) -> float | None:
    """The modelled speed-up with this machine's measured costs (costed_parts). R = τ/(1 + cδ) assumes a
    verification costs one forward whatever its size; on a CPU it does not, and this says by how much."""
    parts = costed_parts(traces, cost)
    return parts[0] / parts[1] if parts and parts[1] > 0 else None


def run_stats(traces: list[StepTrace], step_ms: list[float], output_ids: list[int], greedy: bool,
              baseline: Baseline | None, finished: bool = False, prefill_ms: float = 0.0, cost=None) -> RunStats:
    """step_ms: wall time of each step() call with any prefill already taken out (prefill_ms: a prefill
    still inside the first step, for callers that timed whole calls); cost: this machine's cost curve, for
    the curve-aware R."""
    steps = len(traces)
    tokens = sum(t.tau for t in traces)
    mat = tokens / steps if steps else 0.0
    mean_delta = sum(t.delta for t in traces) / steps if steps else 0.0
    decode_ms = list(step_ms)
    if decode_ms and prefill_ms:
        decode_ms[0] = max(0.0, decode_ms[0] - prefill_ms)
    total_s = sum(decode_ms) / 1000
    tok_s = tokens / total_s if total_s > 0 else 0.0
    tq = draft_ms_per_forward(traces)
    c = c_note = None
    if tq is None:
        c, c_note = 0.0, "no draft forwards in this run, so c·δ = 0"
    elif baseline is not None and baseline.ms_per_forward > 0:
        c = tq / baseline.ms_per_forward
        c_note = (f"c = T_q/T_p = {tq:.2f} ms per draft forward (this run) / "
                  f"{baseline.ms_per_forward:.2f} ms per target forward (median AR step, this prompt)")
    else:
        c_note = "c needs the AR baseline's target forward time"
    R = modelled_r(mat, c, mean_delta) if c is not None and steps else None
    spread = measured_speedup([t.tau for t in traces], decode_ms, baseline)
    ok, note = lossless_check(output_ids, baseline, greedy, finished)
    return RunStats(steps, tokens, mat, mean_delta, tok_s, c, R, None if spread is None else spread.value, ok, note,
                    c_note or "", spread, "" if baseline is None else baseline.note, curve_r(traces, cost))


@dataclass
class DepthAcceptance:
    """One depth of the drafted trees over a run: how often the accepted path got through it."""
    depth: int  # 0 = the first drafted token
    steps: int  # steps that drafted at least one node at this depth
    accepted: int  # of those, steps whose accepted path reached this depth
    score_sum: float  # Σ p(u) of the nodes at this depth: the drafter's own estimate of `accepted`

    @property
    def rate(self) -> float:
        return self.accepted / self.steps if self.steps else 0.0

    @property
    def predicted(self) -> float:
        return self.score_sum / self.steps if self.steps else 0.0


def acceptance_by_depth(traces: list[StepTrace]) -> list[DepthAcceptance]:
    """Per depth d (0 = the first drafted token), over the steps whose tree reached d, the share whose
    accepted path got through it (the counts are the compatibility readout's, core/eagle3/readout.py), beside
    Σp(u)'s prediction (a calibrated drafter has the two equal; `auto` models the same numbers)."""
    tally = PositionTally()
    tally.add(traces)
    scores = [0.0] * len(tally.reached)
    for t in traces:
        for node in t.nodes:
            scores[node.depth] += node.score
    return [DepthAcceptance(d, tally.reached[d], tally.accepted[d], scores[d]) for d in range(len(tally.reached))]
