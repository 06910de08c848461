"""`auto`'s predictor: what each budget of its grid would have done, replayed on the recent trees.

    rate(N) = Σ_r w_r τ_r(N) / Σ_r w_r ms_r(N)        over the recent trees r grown with a budget ≥ N

- τ_r(N) is what tree r, cut to its first N nodes, *did* commit: 1 + the accepted path's nodes among the
  kept ones. Nodes are kept ancestors first (TALON's growth order is exactly the tree a budget of N grows;
  the static tree of a smaller budget keeps the best N by p(u)), and the target's walk picks the same token
  at every node it visits whatever the siblings: the argmax under greedy decoding, and under sampling the
  same draw from p with the session's generator (one draw per visited node). So the cut tree's walk follows
  the same path and stops at its first dropped node: the count is exact in both cases (up to the last-bit
  noise of a different batch shape).
- ms_r(N) = step r's measured wall time + β · (curve_r(N) − curve_r(its own size)), where curve is
  Σ_levels t_draft(width) + t_verify(n + 1) from the measured cost curves (core/auto/cost_model.py) and β is
  the run's own step ms per curve ms, fitted over the recent steps: the curves are timed over a fixed
  context, and a step's per-node work outside the forwards grows with the tree too.
- w_r halves every `half_life` steps of age, so a burst of accepted tokens or an easy prompt fades.

Two budgets are compared on the same trees (those grown with a budget ≥ both), so the noise of which
steps happened to be easy cancels; a gain comes with its jackknife standard error, which says how much it
rests on a tree or two.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.auto.config import DEFAULT, AutoConfig
from core.auto.cost_model import CostModel
from core.auto.replay import Replay, Table, age_weights, tau_of


@dataclass
class Predictor:
    cost: CostModel
    grid: tuple[int, ...]  # ascending budgets it predicts for
    cfg: AutoConfig = DEFAULT
    recent: list[Replay] = field(default_factory=list)
    table: Table | None = None  # the recent replays at every budget of the grid
    slope: float = 1.0  # β: the run's step ms per cost-curve ms (1 while nothing was timed)

    def __post_init__(self) -> None:
        top = max(self.grid) + 2  # the curves read once per size: observe runs every step
        self.t_verify = [self.cost.t_verify(n) for n in range(top)]
        self.t_draft = [self.cost.t_draft(w) for w in range(top)]
        if self.table is None:
            self.table = Table.empty(len(self.grid))

    def _tv(self, n: int) -> float:
        return self.t_verify[n] if n < len(self.t_verify) else self.cost.t_verify(n)

    def _td(self, w: int) -> float:
        return self.t_draft[w] if w < len(self.t_draft) else self.cost.t_draft(w)

    def curves(self, r: Replay, ns: list[int]) -> list[float]:
        """The cost curves' ms of replay r cut to each n of `ns`: a drafter forward per level grown (the
        root's over one node, level d + 1's over every node at depth d; a static tree always grows its D + 1
        levels) and one verification over n + 1 tokens."""
        depths = np.asarray(r.depths, dtype=np.int64)
        out = []
        for n in ns:
            n = min(n, len(depths))
            widths = [1, *np.bincount(depths[:n]).tolist()[:-1]]  # level 0 expands the root
            if r.static_levels is not None:
                widths += [widths[-1]] * max(0, int(r.static_levels) - len(widths))
            out.append(sum(self._td(w) for w in widths) + self._tv(n + 1))
        return out

    def observe(self, r: Replay) -> None:
        """Add one finished tree: its τ and curve ms at every budget of the grid become a row of the table."""
        self.recent = (self.recent + [r])[-self.cfg.history:]
        *curve, full = self.curves(r, [*self.grid, len(r.depths)])
        self.table = self.table.append([tau_of(r, n) for n in self.grid], curve, full, r.step_ms, r.forward_ms,
                                       r.budget, self.cfg.history)

    def fit_slope(self) -> float:
        """β: the least-squares slope of the recent steps' wall time over their trees' curve ms when the trees
        differ enough in size (the explorations see to that), else the forwards' measured / curve ratio.
        Fitted on whole steps, it carries the per-node work outside the forwards (tree logic, walk, trace)."""
        x, y, t = self.table.full, self.table.step, self.table
        if len(x) >= 4 and x.std() > 0.1 * max(x.mean(), 1e-9):
            slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
        elif len(x) and t.forward.sum() > 0:
            slope = float(t.forward.sum() / max(x.sum(), 1e-9))
        else:
            slope = 1.0
        low, high = self.cfg.slope_range
        return min(high, max(low, slope))

    def step_ms(self) -> np.ndarray:
        """(R, G) predicted wall ms of each recent step had its tree been cut to each budget of the grid."""
        t = self.table
        ms = t.step[:, None] + self.slope * (t.curve - t.full[:, None])
        return np.maximum(ms, self.cfg.min_share * t.step[:, None])

    def weights(self, over: np.ndarray) -> np.ndarray:
        """(R, C) each recent tree's weight for each budget of `over`: its age weight, 0 below its budget."""
        ages = age_weights(len(self.table.step), self.cfg.half_life)
        return ages[:, None] * (self.table.budget[:, None] >= over[None, :])

    def rates(self, over: int = 0) -> np.ndarray:
        """(G,) predicted tokens per second at each budget n of the grid, each from the recent trees grown
        with a budget ≥ max(n, over) (NaN where there is none): pass the larger of two budgets to compare
        them on the same trees."""
        w = self.weights(np.maximum(np.array(self.grid), over))  # (R, G)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = 1000.0 * (self.table.tau * w).sum(0) / (self.step_ms() * w).sum(0)
        return np.where(w.any(0), rate, np.nan)

    def rate(self, n: int, over: int = 0) -> float | None:
        """rates() at budget n of the grid; None where no recent tree answers for it."""
        x = float(self.rates(over)[self.grid.index(n)])
        return None if np.isnan(x) else x

    def gains(self, candidates: list[int], here: int) -> dict[int, tuple[float, float]]:
        """(rate(g) / rate(here), its jackknife standard error) for each candidate g of the grid, on the trees
        that answer for both (grown with a budget ≥ max(g, here)). Candidates resting on fewer than
        min_paired such trees (min_paired_down below `here`; counted as their effective number under the age
        weights) are left out."""
        if not candidates or not len(self.table.step):
            return {}
        w = self.weights(np.maximum(np.array(candidates), here))  # (R, C)
        ms = self.step_ms()
        g_cols, h_col = [self.grid.index(g) for g in candidates], self.grid.index(here)
        parts = np.stack([self.table.tau[:, g_cols], ms[:, g_cols],
                          np.repeat(self.table.tau[:, [h_col]], len(g_cols), 1),
                          np.repeat(ms[:, [h_col]], len(g_cols), 1)]) * w  # (4, R, C) weighted sums' terms
        total = parts.sum(1)  # (4, C)
        loo_sums = total[:, None, :] - parts  # (4, R, C): the sums with tree r left out
        with np.errstate(invalid="ignore", divide="ignore"):
            gain = total[0] * total[3] / (total[1] * total[2])  # (C,)
            loo = loo_sums[0] * loo_sums[3] / (loo_sums[1] * loo_sums[2])  # (R, C)
        used = w > 0
        n = used.sum(0)
        mean = np.where(used, loo, 0).sum(0) / np.maximum(n, 1)
        se = np.sqrt((n - 1) / np.maximum(n, 1) * np.where(used, (loo - mean) ** 2, 0).sum(0))
        n_eff = w.sum(0) ** 2 / np.maximum((w ** 2).sum(0), 1e-12)  # (C,) trees it rests on, under the age weights
        need = [self.cfg.min_paired_down if g < here else self.cfg.min_paired for g in candidates]
        return {g: (float(gain[j]), float(se[j])) for j, g in enumerate(candidates) if round(n_eff[j]) >= need[j]}
