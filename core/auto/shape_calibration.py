"""The shaping temperature T_shape fitted to the run (ours, not the papers'): temperature scaling of the
drafter against the target's own choices.

A tree policy trusts q: TALON's gate compares p(u) = Π q along paths, the static tree reranks by it. A
drafter whose q is flatter than its hit rate (the separate draft LM) lets too many shallow siblings pass;
one sharper than it (the head at small T) starves the siblings. Every step tells us what the target chose
at the root and at each accepted node, where the drafter's logits z are already computed, so the
calibrated temperature is the T that makes those choices most likely (temperature scaling):

    T* = argmin_T  Σ_points −log softmax(z / T)[the target's choice]     (greedy)
    T* = argmin_T  Σ_points  H(p, softmax(z / T))                          (sampling: p, the target's distribution)

It only changes which nodes are drafted: verification never reads q (greedy and sampled trees alike), so
any T is lossless. On the held-out prompts the fitted T lands near the sweep's best trees (the benchmark
history in docs/bench/: auto, T_shape). auto moves T_shape by `next_temperature` with the settings of
core/auto/config.py.
"""
from __future__ import annotations

import numpy as np
import torch

from core.auto.config import AutoConfig

SUPPORT = 64  # tokens of each row the fit looks at: a tree only ever drafts a node's best few children, and
# scoring a whole vocabulary at every temperature would cost a sizeable share of a step on a CPU
T_GRID = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 1.0)  # the temperatures auto weighs


def nll_by_temperature(z: torch.Tensor, target: torch.Tensor) -> tuple[list[float], int]:
    """(Σ_rows cross-entropy of softmax(z / T) to `target`, for each T of T_GRID; rows used).

    z: (R, V) the drafter's logits where the target chose; target: what it chose, (R,) token ids (greedy)
    or (R, V) its distribution p (sampling). q is taken over the drafter's SUPPORT best tokens (and a greedy
    choice, whatever its rank) that it can propose (finite z), p renormalised over them: a token outside a
    reduced draft vocabulary, or far down the list, is never drafted whatever T. Rows with none of the
    target's mass there say nothing about T and are left out."""
    z = z.float()
    top = z.topk(min(SUPPORT, z.shape[-1]), -1)  # (R, S)
    temps = torch.tensor(T_GRID, device=z.device)[:, None, None]  # (G, 1, 1)
    if target.dim() == 1:  # greedy: the target's choice
        picked = z.gather(1, target[:, None].to(z.device))  # (R, 1)
        extra = torch.where(picked >= top.values[:, -1:], torch.full_like(picked, float("-inf")), picked)
        support = torch.cat([top.values, extra], 1)  # (R, S + 1): the choice once, in the top or added
        usable = torch.isfinite(picked[:, 0])
        expected_z = picked[usable, 0]  # (R',)
    else:  # sampling: the target's distribution over the same support
        finite = torch.isfinite(top.values)  # (R, S)
        w = target.float().gather(1, top.indices) * finite  # (R, S)
        mass = w.sum(-1)  # (R,)
        usable = mass > 1e-6
        w = w[usable] / mass[usable, None]
        support = top.values
        expected_z = (w * torch.where(finite[usable], support[usable], torch.zeros_like(w))).sum(-1)  # (R',)
    if not bool(usable.any()):
        return [0.0] * len(T_GRID), 0
    lse = torch.logsumexp(support[usable][None] / temps, -1)  # (G, R')
    ce = lse - expected_z[None] / temps[:, :, 0]  # (G, R')
    return ce.sum(1).tolist(), int(usable.sum())


def best_temperature(nll_sums: list[float], current: float) -> float:
    """The grid temperature with the least total NLL, ties kept at the one nearest `current`."""
    best = min(range(len(T_GRID)), key=lambda i: (nll_sums[i], abs(T_GRID[i] - current)))
    return T_GRID[best]


def fitted_temperature(mean: list[float], current: float) -> float:
    """The calibrated T between grid points: the vertex of the parabola through the best grid T and its two
    neighbours (clamped to them; the best T itself at an end of the grid). The CE curve is flat near its
    minimum, so the grid's argmin alone jumps a notch on noise."""
    i = T_GRID.index(best_temperature(mean, current))
    if i == 0 or i == len(T_GRID) - 1:
        return T_GRID[i]
    (x0, x1, x2), (y0, y1, y2) = T_GRID[i - 1: i + 2], mean[i - 1: i + 2]
    den = (x0 - x1) * (x0 - x2) * (x1 - x2)
    a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
    b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den
    return min(x2, max(x0, -b / (2 * a))) if a > 0 else x1


def next_temperature(nll: np.ndarray, rows: float, current: float, cfg: AutoConfig) -> tuple[float, str]:
    """(T_shape for the next steps, why): one T_GRID notch toward cfg.sharpen × the temperature under which
    the target's recent choices were most likely, once cfg.min_calibration choices are in, and only when
    that goal lies beyond cfg.t_dead_zone of the way to the next notch, so noise near the optimum cannot
    flip it back and forth. nll: (len(T_GRID),) the (age-weighted) Σ cross-entropy of the choices at each
    T; rows: how many choices it sums (weighted alike)."""
    if rows < cfg.min_calibration:
        return current, ""
    mean = list(nll / rows)  # (len(T_GRID),)
    here = min(range(len(T_GRID)), key=lambda i: abs(T_GRID[i] - current))
    fit = fitted_temperature(mean, current)
    goal = cfg.sharpen * fit
    nxt = here + (1 if goal > T_GRID[here] else -1)
    if not 0 <= nxt < len(T_GRID) or abs(goal - T_GRID[here]) < cfg.t_dead_zone * abs(T_GRID[nxt] - T_GRID[here]):
        return current, ""
    return T_GRID[nxt], (f"T_shape {current:g} → {T_GRID[nxt]:g}: the target's recent choices fit q best at "
                         f"T = {fit:.2f}; the trees use {cfg.sharpen:g}× that, {goal:.2f}")
