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
any T is lossless. On the held-out prompts the fitted T lands where the sweep's best trees are (about 0.35
for the draft LM, 0.5 for the head; README "auto").
"""
from __future__ import annotations

import numpy as np
import torch

SUPPORT = 64  # tokens of each row the fit looks at: a tree only ever drafts a node's best few children, and
# scoring a whole vocabulary at eleven temperatures costs about a millisecond a step on a CPU (64: 0.16 ms)
MIN_CALIBRATION = 16  # target choices the evidence must hold before T_shape moves
SHARPEN_NOTCHES = 1  # T_shape is kept one notch sharper than the best fit: the fastest trees were (README "auto")
T_HYSTERESIS = 0.005  # nats a choice the best fit must gain over the one that keeps T_shape where it is
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


def next_temperature(nll: np.ndarray, rows: np.ndarray, weights: np.ndarray, current: float) -> tuple[float, str]:
    """(T_shape for the next steps, why): one T_GRID notch toward SHARPEN_NOTCHES below the temperature
    under which the target's recent choices were most likely, once MIN_CALIBRATION choices are in and only
    when that best fit beats the fit that would keep T_shape where it is by T_HYSTERESIS nats a choice, so
    noise near the optimum cannot flip it back and forth. nll: (R, len(T_GRID)) Σ cross-entropy per step;
    rows: (R,) the choices each sums; weights: (R,) each step's weight."""
    if rows.sum() < MIN_CALIBRATION:
        return current, ""
    mean = (weights[:, None] * nll).sum(0) / max(float((weights * rows).sum()), 1e-9)  # (len(T_GRID),)
    here = min(range(len(T_GRID)), key=lambda i: abs(T_GRID[i] - current))
    fit_here = min(here + SHARPEN_NOTCHES, len(T_GRID) - 1)  # the best fit that would keep T_shape here
    fit = T_GRID.index(best_temperature(list(mean), T_GRID[fit_here]))
    goal = max(0, fit - SHARPEN_NOTCHES)
    if goal == here or mean[fit_here] - mean[fit] < T_HYSTERESIS:
        return current, ""
    nxt = here + (1 if goal > here else -1)
    return T_GRID[nxt], (f"T_shape {current:g} → {T_GRID[nxt]:g}: the target's recent choices fit q best at "
                         f"T = {T_GRID[fit]:g} ({mean[fit]:.3f} vs {mean[fit_here]:.3f} nats a choice at "
                         f"{T_GRID[fit_here]:g}); the trees use one notch sharper")
