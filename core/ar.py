"""The autoregressive baseline: one target forward, one token. Every method must reproduce it."""
from __future__ import annotations

from dataclasses import dataclass

from core.engine import Session, Timer
from core.sampling import next_token, probs
from core.trace import ROOT, StepTrace, TargetChoice


@dataclass
class ARMethod:
    name: str = "ar"
    needs_draft: bool = False
    scratch: int = 1

    def prepare(self, s: Session) -> None:
        """Nothing to measure before stepping."""

    def step(self, s: Session) -> StepTrace:
        with Timer(s.target.device) as t:
            # 1. one target forward over the pending token(s)
            pending = s.pending(s.tcache)
            start = s.tcache.length
            logits = s.target.forward(pending, range(start, start + len(pending)), s.tcache).logits[-1]  # (V,)
            # 2. the target's own choice, from exactly the distribution verification uses
            dist = probs(logits, s.sampling)
            tok = next_token(logits, dist, s.sampling, s.gen)
        choice = TargetChoice(ROOT, tok, s.text_of(tok), float(dist[tok]))
        # 3. commit
        return s.step_trace(s.commit([tok]), verify_ms=t.ms, target_forwards=1, choices=[choice])
