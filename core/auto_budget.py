"""`auto`: the tree budget N chosen per step to maximise predicted tokens per second on this machine.

    predicted rate(N) = E[τ | tree of N nodes] / (t_build + Σ_levels t_draft(width) + t_verify(N + 1))

- t_verify and t_draft come from the measured cost curves (core/cost_model.py);
- E[τ | tree] = 1 + Σ_u κ_d · p(u), where κ_d is the run's own acceptance model: per depth d, drafted
  nodes accepted over their summed p(u) so far (1 when q is calibrated; below 1 when q is over-confident);
- the tree of N nodes is replayed from the last few steps' trees, truncated to their first N nodes (for
  TALON that is exactly the tree a budget of N would have grown; for the static tree, the best N by p(u)).

It starts from a prior (the largest N whose verification costs at most PRIOR_SLOWDOWN × a one-token
forward: small on a CPU, large on a GPU) and moves at most one grid notch per step, and only for a
predicted gain above HYSTERESIS, so it cannot oscillate. A budget is predicted only from trees grown with
at least that budget, so every EXPLORE_EVERY-th step grows one notch above the current N: that tree then
answers for both budgets. μ and the static depth D are left as set: N is the knob whose best value
depends on the hardware.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from core.cost_model import CostModel
from core.trace import AutoChoice, StepTrace

GRID = (2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
HISTORY = 8  # recent trees replayed
HYSTERESIS = 0.03
PRIOR_SLOWDOWN = 1.6
EXPLORE_EVERY = 4


@dataclass
class AcceptanceModel:
    """Per depth: accepted drafted nodes and their summed p(u), over the run so far."""
    accepted: list[float] = field(default_factory=list)
    score: list[float] = field(default_factory=list)

    def update(self, trace: StepTrace) -> None:
        for node in trace.nodes:
            while len(self.score) <= node.depth:
                self.accepted.append(0.0)
                self.score.append(0.0)
            self.score[node.depth] += node.score
            self.accepted[node.depth] += node.status == "accepted"

    def kappa(self, depth: int) -> float:
        """Accepted / Σ p(u) at this depth, shrunk towards 1 (calibrated) while evidence is thin."""
        if depth >= len(self.score):
            return self.kappa(depth - 1) if depth else 1.0
        return (self.accepted[depth] + 1.0) / (self.score[depth] + 1.0)


@dataclass
class Replay:
    """One recent tree, reduced to what the predictor needs: (depth, p(u)) in growth order."""
    nodes: list[tuple[int, float]]
    budget: int  # the N it was grown with: it answers for every budget up to this one
    build_ms: float
    static_levels: int | None  # static tree: δ = D + 1 whatever N


def replay_of(trace: StepTrace, static: bool, used_n: int) -> Replay:
    nodes = [(n.depth, n.score) for n in trace.nodes]
    if static:  # the static tree of a smaller budget keeps the best N by p(u), ancestors first
        nodes.sort(key=lambda x: (-x[1], x[0]))
    return Replay(nodes, used_n, trace.build_ms, trace.delta if static else None)


@dataclass
class AutoState:
    """Per-session state of `auto` (lives in Session.state)."""
    cost: CostModel
    N: int
    n_max: int
    acceptance: AcceptanceModel = field(default_factory=AcceptanceModel)
    recent: list[Replay] = field(default_factory=list)
    last: AutoChoice | None = None
    steps: int = 0

    @classmethod
    def start(cls, cost: CostModel, n_max: int) -> "AutoState":
        allowed = [g for g in GRID if g <= n_max] or [n_max]
        base = cost.t_verify(1)
        prior = max([g for g in allowed if cost.t_verify(g + 1) <= PRIOR_SLOWDOWN * base] or allowed[:1])
        return cls(cost, prior, n_max, last=AutoChoice(prior, None, f"prior: largest N whose verification costs "
                                                                   f"≤ {PRIOR_SLOWDOWN}× a 1-token forward"))

    def predict(self, n: int, r: Replay) -> tuple[float, float]:
        """(E[τ], step ms) of replay r truncated to n nodes."""
        kept = r.nodes[:n]
        tau = 1.0 + sum(self.acceptance.kappa(d) * p for d, p in kept)
        widths = [1]  # level 0 expands the root; level d + 1 expands every node at depth d
        depth_counts: dict[int, int] = {}
        for d, _ in kept:
            depth_counts[d] = depth_counts.get(d, 0) + 1
        deepest = max(depth_counts) if depth_counts else -1
        widths += [depth_counts.get(d, 0) for d in range(deepest)]
        if r.static_levels is not None:
            widths = widths + [widths[-1]] * max(0, r.static_levels - len(widths))
        ms = r.build_ms + sum(self.cost.t_draft(w) for w in widths) + self.cost.t_verify(len(kept) + 1)
        return tau, ms

    def rate(self, n: int) -> float | None:
        """Predicted tokens per second at budget n, from the recent trees grown with a budget ≥ n."""
        usable = [r for r in self.recent if r.budget >= n]
        if not usable:
            return None
        taus, mss = zip(*(self.predict(n, r) for r in usable))
        return 1000.0 * sum(taus) / sum(mss)

    def choose(self) -> AutoChoice:
        """The budget for the next step (at most one notch from the current one)."""
        if not self.recent:
            return self.last
        self.steps += 1
        grid = sorted({g for g in GRID if g <= self.n_max} | {self.N})
        i = grid.index(self.N)
        here = self.N
        near = grid[max(0, i - 1): i + 2]
        predicted = [(g, r) for g in grid if (r := self.rate(g)) is not None]
        rates = dict(predicted)
        if self.steps % EXPLORE_EVERY == 0 and i + 1 < len(grid):
            up = grid[i + 1]  # this step only: its tree tells what one notch more would commit
            self.last = AutoChoice(up, None, f"exploring N = {up} for one step (resting at N = {here})", predicted)
            return self.last
        best = max((g for g in near if g in rates), key=lambda g: rates[g], default=here)
        reason = f"N = {here}: predicted {rates.get(here, 0):.0f} tok/s"
        if best != here and rates[best] > rates.get(here, 0) * (1 + HYSTERESIS):
            reason = f"N {here} → {best}: predicted {rates[best]:.0f} vs {rates.get(here, 0):.0f} tok/s"
            self.N = best
        self.last = AutoChoice(self.N, None, reason, predicted)
        return self.last

    def observe(self, trace: StepTrace, static: bool, used_n: int) -> None:
        self.acceptance.update(trace)
        self.recent = (self.recent + [replay_of(trace, static, used_n)])[-HISTORY:]
