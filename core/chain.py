"""The autoregressive baseline and chain speculative decoding with a separate draft model."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.engine import Session, Timer
from core.sampling import choose, probs
from core.trace import ROOT, DraftNode, StepTrace, TargetChoice
from core.verify import verify_chain_greedy, verify_chain_sampling


def feed(lm, cache, tokens: list[int]) -> torch.Tensor:
    """Append `tokens` at the next positions of `cache` (causal); returns their logits (T, V)."""
    start = cache.length
    return lm.forward(tokens, range(start, start + len(tokens)), cache).logits


@dataclass
class ARMethod:
    """Plain autoregressive decoding: one target forward, one token."""
    name: str = "ar"
    needs_draft: bool = False

    def step(self, s: Session) -> StepTrace:
        trace = s.new_trace()
        with Timer(s.target.device) as t:
            # 1. one target forward over the pending token(s)
            logits = feed(s.target, s.tcache, s.pending(s.tcache))[-1]  # (V,)
            # 2. the target's own choice, from exactly the distribution verification uses
            dist = probs(logits, s.sampling)
            tok = choose(logits, dist, s.sampling, s.gen)
        trace.verify_ms, trace.target_forwards = t.ms, 1
        trace.choices = [TargetChoice(ROOT, tok, s.text_of(tok), float(dist[tok]))]
        return s.finish_trace(trace, [tok])


@dataclass
class ChainMethod:
    """Chain speculative decoding: the draft proposes γ tokens one by one; one target forward checks them."""
    gamma: int = 5
    name: str = "chain"
    needs_draft: bool = True

    def __post_init__(self) -> None:
        if self.gamma < 1:
            raise ValueError(f"gamma must be >= 1 (got {self.gamma})")

    def step(self, s: Session) -> StepTrace:
        trace = s.new_trace()
        gamma = min(self.gamma, s.remaining - 1)  # the bonus token always fits
        d_start, t_start = s.dcache.length, s.tcache.length
        # 1. draft γ tokens autoregressively, keeping each q they were drawn from
        drafted: list[int] = []
        q_rows: list[torch.Tensor] = []
        with Timer(s.target.device) as t_draft:
            feed_tokens = s.pending(s.dcache)
            n_pending_draft = len(feed_tokens)
            for _ in range(gamma):
                logits = feed(s.draft, s.dcache, feed_tokens)[-1]  # (V,)
                q = probs(logits, s.sampling)
                tok = choose(logits, q, s.sampling, s.gen)
                drafted.append(tok)
                q_rows.append(q)
                feed_tokens = [tok]
        for i, tok in enumerate(drafted):
            score = float(q_rows[i][tok]) * (trace.nodes[-1].score if trace.nodes else 1.0)
            trace.nodes.append(DraftNode(tok, s.text_of(tok), i - 1 if i else ROOT, i, float(q_rows[i][tok]), score))
        # 2. one target forward over pending + drafted tokens; row j predicts drafted[j]
        with Timer(s.target.device) as t_verify:
            pending = s.pending(s.tcache)
            logits = feed(s.target, s.tcache, pending + drafted)[len(pending) - 1:]  # (γ + 1, V)
            p = probs(logits, s.sampling)
            if s.sampling.greedy:
                verdict = verify_chain_greedy(drafted, logits)
            else:
                verdict = verify_chain_sampling(drafted, torch.stack(q_rows) if q_rows else p[:0], p, s.gen)
        trace.draft_ms, trace.verify_ms = t_draft.ms, t_verify.ms
        trace.delta, trace.target_forwards = gamma, 1
        # 3. record what the target saw and chose
        a = verdict.accepted
        for i, node in enumerate(trace.nodes):
            node.p = float(p[i, node.token_id])
            node.status = "accepted" if i < a else "rejected" if i == a else "unreached"
        trace.accepted_path = list(range(a))
        trace.choices = [TargetChoice(ROOT if i == 0 else i - 1, drafted[i], trace.nodes[i].text, trace.nodes[i].p)
                         for i in range(a)]
        trace.choices.append(TargetChoice(a - 1 if a else ROOT, verdict.bonus, s.text_of(verdict.bonus),
                                          float(p[a, verdict.bonus])))
        trace.details = {"gamma": gamma, "residual": verdict.residual}
        # 4. keep only cache entries of committed tokens (the bonus is fed next step)
        s.tcache.rollback(t_start + len(pending) + a)
        s.dcache.rollback(min(s.dcache.length, d_start + n_pending_draft + a))
        return s.finish_trace(trace, drafted[:a] + [verdict.bonus])
