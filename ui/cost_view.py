"""Tune tab's cost panel: this machine's measured t_verify(n) (core.auto.cost_model, cached per device, model,
dtype and drafter) beside the speed-up over AR modelled for the visitor's TALON run at each budget N.

The model is auto's own (core.auto.predict): τ from what the run's recent trees, truncated to N nodes,
committed, step time from the measured curves scaled to the run's own forwards; AR is one 1-token forward
per token. So the curve exists for any TALON run, auto or not, up to the largest budget it used."""
from __future__ import annotations

from dataclasses import dataclass

from core.auto.config import DEFAULT
from core.auto.cost_model import CostModel
from core.auto.predict import Predictor
from core.auto.replay import budget_of, replay_of
from ui.run import Run
from ui.worker import cost_curve


@dataclass
class CostView:
    cost: CostModel
    chosen_n: int | None
    speedup: list[tuple[int, float]]
    note: str


def modelled_speedup(cost: CostModel, run: Run) -> tuple[int | None, list[tuple[int, float]], str]:
    """(the N the run used last, [(N, modelled speed-up over AR)], where it came from)."""
    traces = [t for t in run.traces if t.method in ("talon", "static") and t.nodes]
    if not traces:
        return None, [], "no TALON step with a tree yet: press Step in the TALON tab"
    last = traces[-1]
    chosen = last.budget()[0]
    recent = traces[-DEFAULT.history:]
    cap = max(budget_of(t) for t in recent)
    grid = sorted({g for g in DEFAULT.grid if g <= cap} | {cap} | ({chosen} if isinstance(chosen, int) else set()))
    predictor = Predictor(cost, tuple(grid))
    for t in recent:
        predictor.observe(replay_of(t))
    predictor.slope = predictor.fit_slope()
    ar_tok_s = 1000.0 / (predictor.slope * cost.t_verify(1))  # AR's forward on the run's scale
    points = [(g, rate / ar_tok_s) for g, rate in zip(grid, predictor.rates()) if rate == rate]  # NaN: no tree
    how = "auto" if last.auto is not None else f"N = {chosen}"
    return chosen, points, (f"modelled from this run's last {len(recent)} trees ({how}, drafter "
                            f"{last.drafter or '?'}) truncated to each N")


def cost_view(run: Run | None, target: str, draft: str, drafter: str, fresh: bool = False) -> CostView:
    """The curve for the run's own target and drafter when there is a run, else for the Tune tab's choice;
    `fresh` measures it again rather than reading the kept one."""
    if run is not None and run.traces:
        target, draft, drafter = run.config.target, run.config.draft, run.config.drafter
    cost = cost_curve(target, draft, drafter, fresh)
    if run is None or not run.traces:
        return CostView(cost, None, [], "Step a TALON run (any preset; auto marks its choice) to model its speed-up")
    chosen, points, note = modelled_speedup(cost, run)
    return CostView(cost, chosen, points, note)
