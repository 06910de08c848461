"""`auto`: the tree budget N chosen per step to maximise tokens per second on this machine, and T_shape
fitted to the drafter. Three parts: its settings (core/auto/config.py), a predictor that replays the
recent trees at every budget (core/auto/predict.py), and the schedule here, whose phases are:

- survey: the first `survey_steps` steps grow one larger tree each (the largest N whose verification costs
  at most `survey_slowdown` one-token forwards): they commit more than a small tree would, so they cost
  little, and they answer for every budget up to theirs. On a real draft the rate over N is not concave (a
  budget that just completes a second level can pay where the ones below it do not), so a walk down from
  a too-small start would never find it;
- explore: one step in `explore_every` grows a larger tree for one step, so larger budgets stay known: in
  a cycle of `resurvey_every` explorations, a survey tree, `explore_up` notches above the resting N, twice
  that, and `explore_up` again;
- nudge: one step in `nudge_every` grows one notch above the resting N (adjacent budgets cost about the
  same, so this is nearly free): resting trees answer for every smaller N, and without these a move up
  would wait for the rare large trees;
- rest: the other steps keep the resting N, so auto's own cost is spread over the steps between decisions;
- decide: right after each nudge (and after the survey), move at most `max_move` notches, only to a
  budget whose gain is above `hysteresis` and clear of 1 by as many jackknife standard errors as notches
  moved (the surest such move wins), on enough paired trees; and move T_shape one notch toward the fit
  (core/auto/shape_calibration.py), from one step in `calibrate_every` that scored the target's choices.

Before the first survey it rests at a prior: the largest N whose verification costs at most
`prior_slowdown` one-token forwards. N is the knob whose best value depends on the hardware, T_shape the
one that depends on the drafter; μ and the static depth D are left as set (neither can be replayed from
the trees already grown).

Memory across sessions is opt-in: a program that decodes many prompts in one process (the CLI, the bench)
passes an AutoMemory, and the next session on the same setup starts where the last one rested instead of
surveying again. The app passes none: one visitor's trees never shape another's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.auto.config import DEFAULT, AutoConfig
from core.auto.cost_model import CostModel
from core.auto.predict import Predictor
from core.auto.replay import calibration_of, replay_of
from core.auto.shape_calibration import T_GRID, next_temperature
from core.trace import AutoChoice, StepTrace


@dataclass
class AutoMemory:
    """The last state of auto per setup (machine, model, dtype, drafter, tree knobs, sampling), carried
    from one session to the next by a program that opts in."""
    states: dict[str, "AutoState"] = field(default_factory=dict)


@dataclass
class AutoState:
    """Per-session state of `auto` (lives in Session.state.auto)."""
    predictor: Predictor
    N: int  # the resting budget
    survey: int = 0  # the budget of the first steps' trees (0: no survey)
    last: AutoChoice | None = None
    steps: int = 0
    observed: int = -1  # index of the last step observed
    T_shape: float = 1.0  # the shaping temperature the trees use now (fitted to the run, one notch a decision)
    t_nll: np.ndarray = field(default_factory=lambda: np.zeros(len(T_GRID)))  # Σ CE at each T, aged
    t_rows: float = 0.0  # the choices t_nll sums, aged alike
    memory: AutoMemory | None = None
    key: str = ""  # what the state is remembered under

    @property
    def cfg(self) -> AutoConfig:
        return self.predictor.cfg

    @property
    def grid(self) -> tuple[int, ...]:
        return self.predictor.grid

    @classmethod
    def start(cls, cost: CostModel, n_max: int, T_shape: float = 1.0, cfg: AutoConfig = DEFAULT,
              memory: AutoMemory | None = None, key: str = "") -> "AutoState":
        """A fresh state from the user's T_shape at the prior, or, when `memory` holds one for `key`, the last
        session's state carried on (its trees, resting N and fitted T_shape)."""
        old = memory.states.get(key) if memory is not None else None
        if old is not None:
            why = f"N = {old.N}, T_shape = {old.T_shape:g}: where auto rested at the end of the last run on this setup"
            return cls(Predictor(cost, old.grid, cfg, list(old.predictor.recent), old.predictor.table,
                                 old.predictor.slope), old.N, old.survey, AutoChoice(old.N, why,
                                                                                     T_shape=old.T_shape),
                       max(old.steps, cfg.survey_steps), T_shape=old.T_shape, t_nll=old.t_nll, t_rows=old.t_rows,
                       memory=memory, key=key)
        allowed = [g for g in cfg.grid if g <= n_max] or [n_max]
        base = cost.t_verify(1)
        prior, survey = (max([g for g in allowed if cost.t_verify(g + 1) <= x * base] or allowed[:1])
                         for x in (cfg.prior_slowdown, cfg.survey_slowdown))
        grid = tuple(sorted({g for g in cfg.grid if g <= n_max} | {prior}))
        why = f"prior: largest N whose verification costs ≤ {cfg.prior_slowdown}× a 1-token forward"
        return cls(Predictor(cost, grid, cfg), prior, survey, AutoChoice(prior, why, T_shape=T_shape),
                   T_shape=T_shape, memory=memory, key=key)

    def wants_calibration(self) -> bool:
        """Whether this step should score the target's choices for T_shape (one step in calibrate_every)."""
        return self.steps % self.cfg.calibrate_every == 0

    def choose_budget(self, traces: list[StepTrace] | None = None) -> AutoChoice:
        """The budget (and T_shape) for the next step: the first phase of the schedule that claims the step,
        else a decision. `traces`: the session's steps so far, observed when auto decides."""
        self.steps += 1
        for phase in (self.surveying, self.exploring, self.nudging, self.resting):
            choice = phase()
            if choice is not None:
                return choice
        return self.decide(traces)

    def _choice(self, n: int, reason: str) -> AutoChoice:
        predicted = self.last.predicted if self.last is not None else []
        return AutoChoice(n, reason, predicted, self.T_shape)

    def surveying(self) -> AutoChoice | None:
        if self.steps <= self.cfg.survey_steps and self.survey > self.N:
            self.last = AutoChoice(self.survey, f"surveying with N = {self.survey} (step {self.steps} of "
                                                      f"{self.cfg.survey_steps}): its tree answers for every "
                                                      f"smaller N", T_shape=self.T_shape)
            return self.last
        return None

    def exploring(self) -> AutoChoice | None:
        i, cfg = self.grid.index(self.N), self.cfg
        if self.steps % cfg.explore_every or i + 1 >= len(self.grid):
            return None
        k = (self.steps // cfg.explore_every) % cfg.resurvey_every  # which exploration of the cycle this is
        up = self.grid[min(i + cfg.explore_up * (2 if k == cfg.resurvey_every // 2 else 1), len(self.grid) - 1)]
        if k == 0:
            up = max(up, self.survey)  # a survey tree again now and then, so a far better N is not lost
        return self._choice(up, f"exploring N = {up} for one step (resting at N = {self.N})")

    def nudging(self) -> AutoChoice | None:
        i = self.grid.index(self.N)
        if self.steps % self.cfg.nudge_every or i + 1 >= len(self.grid):
            return None
        up = self.grid[i + 1]
        return self._choice(up, f"one notch up, N = {up}, for one step (resting at N = {self.N}): is a larger "
                                f"tree worth it?")

    def resting(self) -> AutoChoice | None:
        after_survey = self.steps == self.cfg.survey_steps + 1
        if self.steps % self.cfg.nudge_every == 1 or after_survey or self.last is None:
            return None
        return self._choice(self.N, f"N = {self.N}: resting (auto decides after each nudge)")

    def decide(self, traces: list[StepTrace] | None) -> AutoChoice:
        """Move N toward the surest predicted gain within max_move notches, and T_shape one notch."""
        if traces is not None:
            self.catch_up(traces)
        if not self.predictor.recent:
            return self.last
        grid, here, cfg = self.grid, self.N, self.cfg
        i = grid.index(here)
        predicted = [(g, float(r)) for g, r in zip(grid, self.predictor.rates()) if not np.isnan(r)]
        near = [g for g in grid[max(0, i - cfg.max_move): i + cfg.max_move + 1] if g != here]
        gains = self.predictor.gains(near, here)
        bound = {g: x - abs(grid.index(g) - i) * se for g, (x, se) in gains.items()}  # k notches: k SE
        sure = {g: gains[g][0] for g in gains if gains[g][0] > 1 + cfg.hysteresis and bound[g] > 1}
        best = max(sure, key=bound.get, default=here)
        reason = f"N = {here}: predicted {dict(predicted).get(here, 0):.0f} tok/s"
        if best != here:
            reason = f"N {here} → {best}: predicted {100 * (sure[best] - 1):.0f}% more tok/s on the same recent trees"
            self.N = best
        T_new, why_T = next_temperature(self.t_nll, self.t_rows, self.T_shape, cfg)
        if T_new != self.T_shape:
            reason, self.T_shape = f"{reason}; {why_T}", T_new
        self.last = AutoChoice(self.N, reason, predicted, self.T_shape)
        return self.last

    def observe(self, trace: StepTrace, fit: bool = True) -> None:
        """Add a finished step's tree to the replays (its budget: auto's choice, else its N knob) and its
        T_shape evidence; `fit` refits the slope (catch_up fits once after a batch)."""
        self.predictor.observe(replay_of(trace))
        nll, rows = calibration_of(trace)
        age = 0.5 ** (1 / self.cfg.t_half_life)
        self.t_nll, self.t_rows = age * self.t_nll + np.asarray(nll), age * self.t_rows + rows
        self.observed = trace.index
        if fit:
            self.predictor.slope = self.predictor.fit_slope()
        if self.memory is not None:
            self.memory.states[self.key] = self

    def catch_up(self, traces: list[StepTrace]) -> None:
        """Observe the session's finished steps not seen yet (a step's wall time is known only once the
        session has timed it, so a step is observed at a later step's start), oldest first."""
        new = []
        for t in reversed(traces[-self.cfg.history:]):
            if t.index <= self.observed:
                break
            if t.auto is not None:
                new.append(t)
        for t in reversed(new):
            self.observe(t, fit=False)
        if new:
            self.predictor.slope = self.predictor.fit_slope()
