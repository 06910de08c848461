"""T_shape fitted to the run: temperature scaling of the drafter's logits against the target's choices,
moved by auto one notch at a time."""
import torch

from core.auto.budget import AutoState
from core.auto.config import DEFAULT
from core.auto.shape_calibration import T_GRID, best_temperature, fitted_temperature, nll_by_temperature
from core.trace import TreeStep
from tests.test_auto_budget import chain_trace, cost

NUDGE_EVERY, MIN_CALIBRATION, SHARPEN = DEFAULT.nudge_every, DEFAULT.min_calibration, DEFAULT.sharpen


def test_the_fitted_temperature_is_the_one_the_target_chose_with():
    gen = torch.Generator().manual_seed(0)
    z = 3 * torch.randn(400, 50, generator=gen)  # (R, V) a drafter's logits
    soft, rows = nll_by_temperature(z, torch.softmax(z / 0.4, -1))  # sampling: the target's p
    assert rows == 400 and best_temperature(soft, 1.0) == 0.4
    picks = torch.multinomial(torch.softmax(z / 0.6, -1), 1, generator=gen)[:, 0]  # greedy: one choice a row
    hard, _ = nll_by_temperature(z, picks)
    assert abs(T_GRID.index(best_temperature(hard, 1.0)) - T_GRID.index(0.6)) <= 1


def test_the_fit_lands_between_grid_points_and_stays_inside_the_grid():
    def curve(best: float) -> list[float]:
        return [1 + 10 * (T - best) ** 2 for T in T_GRID]
    assert abs(fitted_temperature(curve(0.58), 1.0) - 0.58) < 1e-6  # between 0.55 and 0.6
    assert fitted_temperature(curve(0.1), 1.0) == T_GRID[0] and fitted_temperature(curve(2.0), 1.0) == T_GRID[-1]
    assert fitted_temperature([1.0] * len(T_GRID), 0.5) == 0.5  # flat: where it is


def test_tokens_the_drafter_cannot_propose_say_nothing_about_T():
    z = torch.tensor([[2.0, 1.0, float("-inf")], [float("-inf")] * 3, [0.5, float("-inf"), 1.0]])
    target = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.5, 0.25, 0.25]])
    sums, rows = nll_by_temperature(z, target)
    assert rows == 1 and all(torch.isfinite(torch.tensor(sums)))  # only the last row, over tokens 0 and 2
    assert nll_by_temperature(z[:2], target[:2]) == ([0.0] * len(T_GRID), 0)
    assert nll_by_temperature(z, torch.tensor([2, 0, 2]))[1] == 1  # greedy: a choice the drafter cannot make


def test_a_choice_far_down_the_drafters_list_still_counts():
    z = torch.arange(1000.0)[None] / 100  # (1, V): token 0 is the drafter's last choice
    sums, rows = nll_by_temperature(z, torch.tensor([0]))
    assert rows == 1 and sums[0] > sums[-1]  # very unlikely under a sharp q: a flatter T fits better


def calibrated_trace(index: int, best: float, rows: int = 4):
    t = chain_trace(8, 3, index=index, costs=cost(flat=False))
    t.tree = TreeStep("talon", {"N": 8}, t_nll=[rows * (1 + 10 * (T - best) ** 2) for T in T_GRID], t_nll_rows=rows)
    return t


def test_auto_walks_T_shape_one_notch_a_decision_towards_the_calibrated_one():
    state = AutoState.start(cost(flat=False), 96, T_shape=0.5)
    state.survey = 0
    seen, rows, why = [state.T_shape], 0, []
    for i in range(8 * NUDGE_EVERY):  # a decision after each nudge, one notch each
        state.observe(calibrated_trace(i, best=0.3))
        rows += 4
        choice = state.choose_budget()
        if rows < MIN_CALIBRATION:
            assert choice.T_shape == 0.5
        if choice.T_shape != seen[-1]:
            why.append(choice.reason)
        seen.append(choice.T_shape)
    steps = [T_GRID.index(a) - T_GRID.index(b) for a, b in zip(seen, seen[1:])]
    assert set(steps) <= {0, 1}
    goal = min(T_GRID, key=lambda T: abs(T - SHARPEN * 0.3))  # the trees use a share of the fit, on the grid
    assert seen[-1] == goal and f"→ {goal:g}" in why[-1] and len(why) == T_GRID.index(0.5) - T_GRID.index(goal)
