"""Runtime-adaptive μ (`--mu-schedule adaptive`): TALON's gate ratio moved after every verification by what it
returned — the TALON paper's stated future work; ours, not the paper's.

The rule, in one sentence (the walk quotes it): when the accepted path reached the tree's last level the tree
was too shallow, so μ rises by a factor (a stricter gate grows deeper, narrower trees); when the token the target
chose where it stopped was a candidate the gate had cut, a looser gate would have kept it, so μ falls by the same
factor (wider levels); otherwise μ stays, since a cut the target did not want is no evidence against the gate.
μ only shapes the tree, so any schedule is lossless.
Its state is the session's own (Session.state.mu), so two visitors never share one.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.trace import ROOT, LevelTrace, PrunedCandidate

FIXED, ADAPTIVE = "fixed", "adaptive"
SCHEDULES = (FIXED, ADAPTIVE)
RULE = ("after each step μ × {factor:g} when the accepted path reached the tree's last level, μ ÷ {factor:g} when "
        "the token the target chose where it stopped was one the gate had cut, else unchanged (within {lo:g}–{hi:g})")


@dataclass(frozen=True)
class AdaptiveMu:
    factor: float = 1.25
    lo: float = 0.01
    hi: float = 0.5

    @property
    def rule(self) -> str:
        return RULE.format(factor=self.factor, lo=self.lo, hi=self.hi)

    def next(self, mu: float, path: list[int], levels: list[LevelTrace], pruned: list[PrunedCandidate],
             choice: int) -> float:
        """μ for the next step, from this one's: `path` the accepted tree nodes, `levels` grown, `pruned` the
        candidates cut, `choice` the token the target committed after the path."""
        if not levels:
            return mu
        if len(path) >= len(levels):  # the walk ran off the bottom of the tree: it could have gone deeper
            return min(self.hi, mu * self.factor)
        stop = path[-1] if path else ROOT
        if any(c.reason == "gate" and c.parent == stop and c.token_id == choice for c in pruned):
            return max(self.lo, mu / self.factor)  # the gate cut the very token the target wanted
        return mu


def check_schedule(name: str) -> str:
    if name not in SCHEDULES:
        raise ValueError(f"μ schedule must be one of {', '.join(SCHEDULES)} (got {name!r})")
    return name
