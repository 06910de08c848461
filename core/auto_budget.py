"""`auto`: the tree budget N chosen per step to maximise tokens per second on this machine.

    rate(N) = Σ_r τ_r(N) / Σ_r ms_r(N)        over the last HISTORY trees r grown with a budget ≥ N

- τ_r(N) is what tree r, truncated to its first N nodes, *did* commit: 1 + the accepted path's nodes
  among the kept ones. Nodes are kept ancestors first (TALON's growth order is exactly the tree a budget
  of N grows; the static tree of a smaller budget keeps the best N by p(u)), so under greedy decoding the
  target's walk follows the same path and stops at its first dropped node: the count is exact. Under
  sampling it is an estimate (fewer siblings would change the draws). An earlier version weighted p(u)
  by the acceptance per depth instead; it over-counted the later, less likely nodes of a level, and every
  N looked about equally good.
- ms_r(N) = step r's measured wall time + β · (curve_r(N) − curve_r(its own size)), where curve is
  Σ_levels t_draft(width) + t_verify(n + 1) from the measured cost curves (core/cost_model.py) and β is
  the run's own step ms per curve ms, fitted over the recent steps: the curves are timed over a fixed
  context, and a step's per-node work outside the forwards grows with the tree too.

Two budgets are compared on the same trees (those grown with a budget ≥ both), so the noise of which
steps happened to be easy cancels, and recent trees weigh more (a tree's weight halves every HALF_LIFE
steps, core/auto_replay.py, which keeps the trees as arrays): a burst of accepted tokens (prompt lookup
on a repeated passage) or an easy prompt fades instead of holding auto at a large tree for the next 64
steps. A tree answers only for budgets up to its own, and on a real draft the rate over N is not concave (a
budget that just completes a second level can pay where the ones below it do not, so a walk down from a
too-small start never finds it). Hence:
- the first SURVEY_STEPS steps grow one larger tree each (the largest N whose verification costs at most
  SURVEY_SLOWDOWN × a one-token forward: mid-sized on a CPU, large on a GPU): they commit more than a small
  tree would, so they cost little, and they answer for every budget up to theirs;
- one step in NUDGE_EVERY grows one grid notch above the resting N (adjacent budgets cost about the same,
  so this is nearly free): resting trees answer for every smaller N, and without these a move up would
  wait for the rare large trees;
- it decides right after each nudge (the steps between keep the resting N, so its own cost is spread
  over NUDGE_EVERY steps), moving at most MAX_MOVE grid notches and only to a budget whose gain is above
  HYSTERESIS and clear of 1 by as many jackknife standard errors as notches moved (the surest such move
  wins), on at least MIN_PAIRED trees (MIN_PAIRED_DOWN for a smaller budget, which every tree answers
  for): a gain that rests on one tree (a burst, or a few surveys that happened to accept nothing) does not
  move it, and it cannot oscillate (a move back would need new trees that say so);
- every EXPLORE_EVERY-th step grows a larger tree for one step, so larger budgets stay known: in a cycle
  of RESURVEY_EVERY explorations, a survey tree, EXPLORE_UP notches above the resting N, twice that, and
  EXPLORE_UP again;
- what it learned (resting N, recent trees) is remembered per machine, model, dtype, drafter and tree
  knobs for the life of the process, so the next session on the same setup starts where this one left
  off instead of surveying again (the bench's prompts run in one process: the first one pays the survey).
Before the first survey it rests at a prior: the largest N whose verification costs at most
PRIOR_SLOWDOWN × a one-token forward. N is the knob whose best value depends on the hardware; the one
whose best value depends on the drafter is T_shape, and auto fits it too (core/shape_calibration.py): one
step in CALIBRATE_EVERY scores the target's choices under q at each T of a grid (the evidence ages with
T_HALF_LIFE), and each decision moves T_shape one notch toward SHARPEN × the best-fitting T
(`next_temperature` there, with its dead zone): on both model drafters the fastest trees were about that
much sharper than the best fit. A flat drafter's q is sharpened, which narrows TALON's gate as a larger μ
would (on the draft LM T_shape ends at 0.3-0.35, which does what μ = 0.2 did by hand). μ and the static
depth D are left as set: neither can be replayed from the trees already grown (μ = 0.15 under the fitted T
was slower in a side-by-side run).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.cost_model import CostModel
from core.auto_replay import HISTORY, Replay, Table, age_weights, calibration_of, replay_of, tau_of
from core.shape_calibration import T_GRID, next_temperature
from core.trace import AutoChoice, StepTrace

GRID = (2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
HYSTERESIS = 0.03
PRIOR_SLOWDOWN = 1.6
SURVEY_SLOWDOWN = 2.0
SURVEY_STEPS = 3
EXPLORE_EVERY = 32
EXPLORE_UP = 2  # grid notches above the resting N an exploring step grows
NUDGE_EVERY = 16  # every so many steps, one notch above the resting N: the evidence a move up needs; auto
# also decides only once in so many steps (right after each nudge), so its own cost stays a small share of
# a step between its decisions. 16, not 8: near the best N the rate is flat within a few per cent, and on the
# head deciding half as often (fewer moves on one prompt's evidence, half the decision work) was 0.6-3% faster
# in four side-by-side runs; on the draft LM and lookup the two were within noise (docs/bench/auto_session9.md)
RESURVEY_EVERY = 4  # explorations per survey tree
MAX_MOVE = 2  # grid notches per decision, up or down; a move of k notches must be clear of no gain by k
# jackknife standard errors, and the surest move wins (gain - k SE): near the best N the rate is flat within a
# few per cent, and a hard prompt made a budget two notches down look better on a few trees (it sent the head
# from 6 to 2, 0.77x the rate at 6, for 30 steps), while on the draft LM two notches down (8 -> 4) pay
# where the one between does not
MIN_PAIRED = 3  # trees both budgets must be measured on before auto moves up to the larger
MIN_PAIRED_DOWN = 6  # ... or down to the smaller: every tree answers for a smaller budget, so waiting for
# more of them costs nothing, and a few unlucky first trees (surveys that accepted little) no longer send it
# from 8 to 2 for a prompt
CALIBRATE_EVERY = 4  # steps: one in so many scores the target's choices under q (0.15-0.3 ms a time on a CPU)
T_HALF_LIFE = 128  # steps: the T_shape evidence halves with this age. Longer than HALF_LIFE: one prompt's best
# fit ranges 0.4-0.75 on the head, and following it per prompt was no faster than holding the overall fit
SLOPE_RANGE = (0.5, 4.0)
MIN_SHARE = 0.1  # a smaller tree is never predicted cheaper than this share of the step it is cut from
_MEMORY: dict[str, "AutoState"] = {}  # key -> the last session's state on that setup


@dataclass
class AutoState:
    """Per-session state of `auto` (lives in Session.state)."""
    cost: CostModel
    N: int
    n_max: int
    survey: int = 0  # the budget of the first steps' trees (0: no survey)
    recent: list[Replay] = field(default_factory=list)
    last: AutoChoice | None = None
    steps: int = 0
    observed: int = -1  # index of the last step observed
    key: str = ""  # what the state is remembered under ("" : not remembered)
    slope: float = 1.0  # the run's step ms per cost-curve ms (fitted; 1 while nothing was timed)
    table: Table | None = field(default=None, repr=False)
    T_shape: float = 1.0  # the shaping temperature the trees use now (fitted to the run, one notch a decision)
    t_nll: np.ndarray = field(default_factory=lambda: np.zeros(len(T_GRID)))  # Σ CE at each T, aged by T_HALF_LIFE
    t_rows: float = 0.0  # the choices t_nll sums, aged alike

    def __post_init__(self) -> None:
        self.grid = tuple(sorted({g for g in GRID if g <= self.n_max} | {self.N}))  # the budgets auto weighs
        top = max(*self.grid, self.n_max) + 2  # the curves read once per size: curve_ms runs every step
        self.t_verify = [self.cost.t_verify(n) for n in range(top)]
        self.t_draft = [self.cost.t_draft(w) for w in range(top)]
        if self.table is None:
            self.table = Table.empty(len(self.grid))

    @classmethod
    def start(cls, cost: CostModel, n_max: int, key: str = "", T_shape: float = 1.0) -> "AutoState":
        """A fresh state starting from the user's T_shape, or the last one remembered under `key` carried
        on (its trees, resting N and fitted T_shape)."""
        if key and key in _MEMORY:
            old = _MEMORY[key]
            why = f"N = {old.N}, T_shape = {old.T_shape:g}: where auto rested at the end of the last run on this setup"
            return cls(cost, old.N, n_max, old.survey, list(old.recent), steps=max(old.steps, SURVEY_STEPS),
                       slope=old.slope, table=old.table, key=key, T_shape=old.T_shape, t_nll=old.t_nll,
                       t_rows=old.t_rows,
                       last=AutoChoice(old.N, None, why, T_shape=old.T_shape))
        allowed = [g for g in GRID if g <= n_max] or [n_max]
        base = cost.t_verify(1)
        prior, survey = (max([g for g in allowed if cost.t_verify(g + 1) <= x * base] or allowed[:1])
                         for x in (PRIOR_SLOWDOWN, SURVEY_SLOWDOWN))
        return cls(cost, prior, n_max, survey, key=key, T_shape=T_shape, last=AutoChoice(
            prior, None, f"prior: largest N whose verification costs ≤ {PRIOR_SLOWDOWN}× a 1-token forward",
            T_shape=T_shape))

    def curve_ms(self, n: int, r: Replay) -> float:
        """The cost curves' ms for the forwards of replay r truncated to n nodes."""
        n = min(n, len(r.depths))
        depths = r.depths[:n]
        counts = [0] * (max(depths) + 1 if depths else 0)
        for d in depths:
            counts[d] += 1
        widths = [1] + counts[:-1]  # level 0 expands the root; level d + 1 expands every node at depth d
        if r.static_levels is not None:
            widths = widths + [widths[-1]] * max(0, r.static_levels - len(widths))
        return sum(self.t_draft[w] for w in widths) + self.t_verify[n + 1]

    def curves(self, r: Replay, ns: list[int]) -> list[float]:
        """curve_ms(n, r) for each n of the ascending `ns`, in one pass over a tree grown level by level
        (TALON's keep order); observe calls this every step, so it must cost next to nothing."""
        if r.static_levels is not None or any(a > b for a, b in zip(r.depths, r.depths[1:])):
            return [self.curve_ms(n, r) for n in ns]
        out, counts, expanded, k = [], [], self.t_draft[1], 0  # expanded: ms of the levels below the last
        for n in ns:
            n = min(n, len(r.depths))
            for d in r.depths[k:n]:
                if d == len(counts):  # a new level: the one before it was expanded whole
                    expanded += self.t_draft[counts[-1]] if counts else 0.0
                    counts.append(0)
                counts[d] += 1
            k = max(k, n)
            out.append(expanded + self.t_verify[n + 1])
        return out

    def wants_calibration(self) -> bool:
        """Whether this step should score the target's choices for T_shape (one step in CALIBRATE_EVERY)."""
        return self.steps % CALIBRATE_EVERY == 0

    def fit_slope(self) -> float:
        """How much a step's wall time grows per ms the cost curves add: the least-squares slope of the
        recent steps' wall time over their trees' curve ms when the trees differ enough in size (the
        explorations see to that), else the forwards' measured / curve ratio. Fitted on whole steps, it
        also carries the per-node work outside the forwards (tree logic, the walk, the trace)."""
        x, y, t = self.table.full, self.table.step, self.table
        if len(x) >= 4 and x.std() > 0.1 * max(x.mean(), 1e-9):
            slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
        elif len(x) and t.forward.sum() > 0:
            slope = float(t.forward.sum() / max(x.sum(), 1e-9))
        else:
            slope = 1.0
        return min(SLOPE_RANGE[1], max(SLOPE_RANGE[0], slope))

    def predict(self, n: int, r: Replay) -> tuple[float, float]:
        """(τ, step ms) of replay r truncated to n nodes."""
        ms = r.step_ms + self.slope * (self.curve_ms(n, r) - self.curve_ms(len(r.depths), r))
        return tau_of(r, n), max(ms, MIN_SHARE * r.step_ms)

    def step_ms(self) -> np.ndarray:
        """(R, G) predicted wall ms of each recent step had its tree been cut to each budget of the grid."""
        t = self.table
        ms = t.step[:, None] + self.slope * (t.curve - t.full[:, None])
        return np.maximum(ms, MIN_SHARE * t.step[:, None])

    def weights(self, over: np.ndarray) -> np.ndarray:
        """(R, C) each recent tree's weight for each budget of `over`: 0 where its budget is below it, else
        its age weight."""
        return age_weights(len(self.table.step))[:, None] * (self.table.budget[:, None] >= over[None, :])

    def pooled(self, cols: list[int], over: np.ndarray) -> np.ndarray:
        """Tokens per second at the grid columns `cols`, each pooled over the recent trees grown with a
        budget ≥ its entry of `over` (nan where there is none), recent trees weighing more."""
        w = self.weights(over)  # (R, C)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = 1000.0 * (self.table.tau[:, cols] * w).sum(0) / (self.step_ms()[:, cols] * w).sum(0)
        return np.where(w.any(0), rate, np.nan)

    def rates(self, over: int = 0) -> np.ndarray:
        """Predicted tokens per second at each budget of the grid, each from the recent trees grown with a
        budget ≥ max(n, over): pass the larger of two budgets to compare them on the same trees."""
        return self.pooled(list(range(len(self.grid))), np.maximum(np.array(self.grid), over))

    def rate(self, n: int, over: int = 0) -> float | None:
        """Predicted tokens per second at budget n (any n: off the grid it replays the trees one by one);
        None where no recent tree answers for it."""
        if n in self.grid:
            x = float(self.rates(over)[self.grid.index(n)])
            return None if np.isnan(x) else x
        usable = [(w, r) for w, r in zip(age_weights(len(self.recent)), self.recent) if r.budget >= max(n, over)]
        if not usable:
            return None
        taus, mss = zip(*((w * tau, w * ms) for w, r in usable for tau, ms in [self.predict(n, r)]))
        return 1000.0 * sum(taus) / sum(mss)

    def gains(self, candidates: list[int], here: int) -> dict[int, tuple[float, float]]:
        """(rate(g) / rate(here), its jackknife standard error) for each candidate g of the grid, on the
        trees that answer for both (those grown with a budget ≥ max(g, here)); candidates with fewer than
        MIN_PAIRED such trees (MIN_PAIRED_DOWN below `here`; counted as their effective number under the age
        weights, so a gain that rests on one recent exploration and a few faded ones is left out) are left
        out. The error says how much the gain rests on a tree or two (a
        burst of accepted tokens, or two surveys that accepted nothing)."""
        if not candidates or not len(self.table.step):
            return {}
        over = np.maximum(np.array(candidates), here)  # each pair on the trees that answer for both
        w = self.weights(over)  # (R, C)
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
        need = [MIN_PAIRED_DOWN if g < here else MIN_PAIRED for g in candidates]
        return {g: (float(gain[j]), float(se[j])) for j, g in enumerate(candidates) if round(n_eff[j]) >= need[j]}

    def choose(self, traces: list[StepTrace] | None = None) -> AutoChoice:
        """The budget for the next step (at most MAX_MOVE notches from the current one). `traces`: the
        session's steps so far, observed here on the steps that decide (the others keep the resting N)."""
        self.steps += 1
        if self.steps <= SURVEY_STEPS and self.survey > self.N:
            self.last = AutoChoice(self.survey, None, f"surveying with N = {self.survey} (step {self.steps} of "
                                                      f"{SURVEY_STEPS}): its tree answers for every smaller N",
                                     T_shape=self.T_shape)
            return self.last
        grid, here = self.grid, self.N
        i = grid.index(here)
        predicted = self.last.predicted if self.last is not None else []
        if self.steps % EXPLORE_EVERY == 0 and i + 1 < len(grid):
            k = (self.steps // EXPLORE_EVERY) % RESURVEY_EVERY  # which exploration of the cycle this is
            up = grid[min(i + EXPLORE_UP * (2 if k == RESURVEY_EVERY // 2 else 1), len(grid) - 1)]
            if k == 0:
                up = max(up, self.survey)  # a survey tree again now and then, so a far better N is not lost
            return AutoChoice(up, None, f"exploring N = {up} for one step (resting at N = {here})", predicted,
                              self.T_shape)
        if self.steps % NUDGE_EVERY == 0 and i + 1 < len(grid):
            return AutoChoice(grid[i + 1], None, f"one notch up, N = {grid[i + 1]}, for one step (resting at "
                                                 f"N = {here}): is a larger tree worth it?", predicted, self.T_shape)
        after_survey = self.steps == SURVEY_STEPS + 1
        if self.steps % NUDGE_EVERY != 1 and not after_survey and self.last is not None:
            return AutoChoice(here, None, f"N = {here}: resting (auto decides after each nudge)", predicted,
                              self.T_shape)
        if traces is not None:
            self.catch_up(traces)
        if not self.recent:
            return self.last
        predicted = [(g, float(r)) for g, r in zip(grid, self.rates()) if not np.isnan(r)]
        near = [g for g in grid[max(0, i - MAX_MOVE): i + MAX_MOVE + 1] if g != here]
        gains = self.gains(near, here)
        bound = {g: x - abs(grid.index(g) - i) * se for g, (x, se) in gains.items()}  # k notches: k SE
        sure = {g: gains[g][0] for g in gains if gains[g][0] > 1 + HYSTERESIS and bound[g] > 1}
        best = max(sure, key=bound.get, default=here)
        reason = f"N = {here}: predicted {dict(predicted).get(here, 0):.0f} tok/s"
        if best != here:
            reason = (f"N {here} → {best}: predicted {100 * (sure[best] - 1):.0f}% more tok/s "
                      f"on the same recent trees")
            self.N = best
        T_new, why_T = self.fit_temperature()
        if T_new != self.T_shape:
            reason, self.T_shape = f"{reason}; {why_T}", T_new
        self.last = AutoChoice(self.N, None, reason, predicted, self.T_shape)
        return self.last

    def fit_temperature(self) -> tuple[float, str]:
        """(T_shape for the next steps, why): core/shape_calibration.next_temperature on the run's evidence,
        recent steps weighing more."""
        return next_temperature(self.t_nll, self.t_rows, self.T_shape)

    def observe(self, trace: StepTrace, fit: bool = True) -> None:
        """Add a finished step's tree to the replays (its budget: auto's choice, else its N knob); `fit`
        refits the slope (catch_up fits once after a batch)."""
        r = replay_of(trace)
        self.recent = (self.recent + [r])[-HISTORY:]
        *curve, full = self.curves(r, [*self.grid, len(r.depths)])
        self.table = self.table.append([tau_of(r, n) for n in self.grid], curve, full, r.step_ms, r.forward_ms,
                                       r.budget)
        nll, rows = calibration_of(trace)
        age = 0.5 ** (1 / T_HALF_LIFE)
        self.t_nll, self.t_rows = age * self.t_nll + np.asarray(nll), age * self.t_rows + rows
        self.observed = trace.index
        if fit:
            self.slope = self.fit_slope()
        if self.key:
            _MEMORY[self.key] = self

    def catch_up(self, traces: list[StepTrace]) -> None:
        """Observe the session's finished steps not seen yet (a step's wall time is known only once the
        session has timed it, so a step is observed at a later step's start), oldest first."""
        new = []
        for t in reversed(traces[-HISTORY:]):
            if t.index <= self.observed:
                break
            if t.auto is not None:
                new.append(t)
        for t in reversed(new):
            self.observe(t, fit=False)
        if new:
            self.slope = self.fit_slope()
