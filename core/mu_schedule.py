"""Runtime-adaptive μ (`--mu-schedule adaptive`): TALON's gate ratio moved after every verification by what it
returned — the TALON paper's stated future work; ours, not the paper's.

The rule, in one sentence (the walk quotes it): when the accepted path reached the tree's last level the tree
was too shallow, so μ rises by a factor (a stricter gate grows deeper, narrower trees); when the target stopped
at a level where the gate had cut candidates, one of them may have been its choice, so μ falls by the same
factor (a looser gate, wider levels); otherwise μ stays. μ only shapes the tree, so any schedule is lossless.
Its state is the session's own (Session.state), so two visitors never share one.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.trace import LevelTrace

FIXED, ADAPTIVE = "fixed", "adaptive"
SCHEDULES = (FIXED, ADAPTIVE)
RULE = ("after each step μ × {factor:g} when the accepted path reached the tree's last level, μ ÷ {factor:g} when "
        "the target stopped at a level whose gate had cut candidates, else unchanged (within {lo:g}–{hi:g})")


@dataclass(frozen=True)
class AdaptiveMu:
    factor: float = 1.25
    lo: float = 0.01
    hi: float = 0.5

    @property
    def rule(self) -> str:
        return RULE.format(factor=self.factor, lo=self.lo, hi=self.hi)

    def next(self, mu: float, accepted: int, levels: list[LevelTrace]) -> float:
        """μ for the next step, from this one's: `accepted` drafted tokens on the accepted path, `levels` grown."""
        if not levels:
            return mu
        if accepted >= len(levels):  # the walk ran off the bottom of the tree: it could have gone deeper
            return min(self.hi, mu * self.factor)
        if levels[accepted].cut_by_gate > 0:  # it stopped where the gate had cut: maybe the target's choice
            return max(self.lo, mu / self.factor)
        return mu


def check_schedule(name: str) -> str:
    if name not in SCHEDULES:
        raise ValueError(f"μ schedule must be one of {', '.join(SCHEDULES)} (got {name!r})")
    return name
