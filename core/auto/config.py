"""`auto`'s settings, declared once and frozen: each with why it is what it is. The side-by-side runs that
chose the values are in docs/bench/auto.md (scripts/auto_variants.py passes variants of this config)."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class AutoConfig:
    grid: tuple[int, ...] = (2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)  # the budgets weighed: adjacent
    # notches cost about the same, so a step up or down is a small, safe move
    history: int = 64  # recent trees replayed: enough that a decision rests on more than one prompt's luck
    half_life: int = 24  # steps: a tree's weight halves with this age, so a burst or an easy prompt fades
    hysteresis: float = 0.03  # a move needs a predicted gain above this: near the best N the rate is flat
    prior_slowdown: float = 1.6  # before any tree: the largest N whose verification costs at most this many
    # one-token forwards (mid-sized on a CPU, large on a GPU)
    survey_slowdown: float = 2.0  # the survey trees' N, by the same rule: larger than the prior, so they
    # answer for every budget up to theirs while costing little
    survey_steps: int = 3  # steps grown at the survey budget before auto rests
    explore_every: int = 32  # one step in so many grows a larger tree, so larger budgets stay known
    explore_up: int = 2  # grid notches above the resting N an exploring step grows (twice that on every
    # other exploration of a cycle)
    resurvey_every: int = 4  # explorations per survey tree, so a far better N is not lost
    nudge_every: int = 16  # one step in so many grows one notch above the resting N (the evidence a move up
    # needs), and auto decides only right after it, so its own cost stays a small share of the steps between
    max_move: int = 2  # grid notches per decision; a move of k notches must clear no gain by k jackknife
    # standard errors, so a few hard trees cannot send it far
    min_paired: int = 3  # trees both budgets must be measured on before auto moves up to the larger
    min_paired_down: int = 6  # ... or down: every tree answers for a smaller budget, so waiting costs nothing
    calibrate_every: int = 4  # one step in so many scores the target's choices under q at each T (T_shape)
    t_half_life: int = 128  # steps: the T_shape evidence ages more slowly than the trees, since one prompt's
    # best fit wanders and following it per prompt did not pay
    slope_range: tuple[float, float] = (0.5, 4.0)  # the fitted step-ms-per-curve-ms, kept physical
    min_share: float = 0.1  # a smaller tree is never predicted cheaper than this share of the step it is cut from
    min_calibration: int = 16  # target choices the T_shape evidence must hold before T_shape moves
    sharpen: float = 0.87  # T_shape aims this share of the best-fitting T: the fastest trees of the sweeps
    # were that much sharper than the fit on both model drafters (a ratio: the T grid is finer below 0.6)
    t_dead_zone: float = 0.6  # T_shape moves a notch only when its goal lies this share of the way there

    def replace(self, **changes) -> "AutoConfig":
        """A variant (scripts/auto_variants.py): each value cast to its field's type, unknown names refused."""
        names = {f.name: type(getattr(self, f.name)) for f in fields(self)}
        unknown = set(changes) - set(names)
        if unknown:
            raise ValueError(f"unknown auto setting(s) {', '.join(sorted(unknown))} (choose from {', '.join(names)})")
        cast = {k: names[k](v) if names[k] in (int, float) else v for k, v in changes.items()}
        return AutoConfig(**{**{f.name: getattr(self, f.name) for f in fields(self)}, **cast})


DEFAULT = AutoConfig()
