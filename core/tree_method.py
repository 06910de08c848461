"""Tree speculative decoding: a policy (static or TALON) shapes the tree, one target forward verifies it."""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from core.drafting import StaticPolicy, TalonPolicy
from core.engine import Session, Timer
from core.sampling import probs
from core.trace import ROOT, DraftNode, StepTrace, TargetChoice
from core.tree import DraftTree, path_to, tree_attention_mask, tree_positions
from core.verify import verify_tree


class DraftExpander:
    """Runs the draft model over a growing tree, one batched forward per level, and remembers where
    each expanded node's K/V went in the draft cache (for compaction after verification)."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.base = s.dcache.length  # committed slots already cached
        self.pending = s.pending(s.dcache)  # committed tokens the draft has not seen yet
        self.root_pos = len(s.ids) - 1
        self.slots: dict[int, int] = {}  # pool node -> draft cache slot
        self.ms = 0.0

    def __call__(self, frontier: list[int], tree: DraftTree) -> torch.Tensor:
        draft, cache = self.s.draft, self.s.dcache
        with Timer(draft.device) as t:
            if frontier == [ROOT]:
                n = len(self.pending)
                logits = draft.forward(self.pending, range(self.base, self.base + n), cache).logits[-1:]  # (1, V)
            else:
                start = cache.length
                mask = torch.zeros(len(frontier), start + len(frontier), dtype=torch.bool, device=draft.device)
                mask[:, : self.base + len(self.pending)] = True  # the committed text
                rows, cols = [], []
                for row, node in enumerate(frontier):
                    for anc in path_to(tree.parents, node)[:-1]:
                        rows.append(row)
                        cols.append(self.slots[anc])
                    rows.append(row)
                    cols.append(start + row)
                    self.slots[node] = start + row
                mask[rows, cols] = True  # ancestors and self
                positions = [self.root_pos + 1 + tree.depths[f] for f in frontier]
                tokens = [tree.tokens[f] for f in frontier]
                logits = draft.forward(tokens, positions, cache, mask=mask).logits  # (F, V)
            q = torch.softmax(logits, -1)  # shapes with the draft's own distribution, whatever the temperature
        self.ms += t.ms
        return q


@dataclass
class TreeMethod:
    policy: StaticPolicy | TalonPolicy
    needs_draft: bool = True

    @property
    def name(self) -> str:
        return self.policy.name

    def step(self, s: Session) -> StepTrace:
        trace = s.new_trace()
        # 1. grow the tree: the policy's logic, with one batched draft forward per level
        expand = DraftExpander(s)
        t0 = time.perf_counter()
        grown = self.policy.grow(expand, max_depth=s.remaining - 1)  # deeper nodes could never be committed
        trace.build_ms = (time.perf_counter() - t0) * 1000 - expand.ms
        trace.draft_ms, trace.delta = expand.ms, grown.forwards
        tree = grown.tree
        # 2. one target forward over [pending, tree] with the tree attention mask
        with Timer(s.target.device) as t_verify:
            pending, base = s.pending(s.tcache), s.tcache.length
            P = len(pending)
            mask = tree_attention_mask(tree.parents, base, P, s.target.device)
            positions = list(range(base, base + P)) + tree_positions(tree.depths, base + P)
            logits = s.target.forward(pending + tree.tokens, positions, s.tcache, mask=mask).logits[P - 1:]  # (1+n, V)
            p = probs(logits, s.sampling)
            verdict = verify_tree(tree.children(), logits, p, s.sampling.greedy, s.gen)
        trace.verify_ms, trace.target_forwards = t_verify.ms, 1
        # 3. keep the accepted path's K/V in both caches, drop the rest
        s.tcache.compact([base + P + i for i in verdict.path], start=base + P)
        fed = [expand.slots[grown.pool_index[i]] for i in verdict.path if grown.pool_index[i] in expand.slots]
        if s.dcache.length > expand.base:  # the draft ran this step
            s.dcache.compact(fed, start=expand.base + len(expand.pending))
        # 4. the trace: every node with what the target thought of it
        self._record(s, trace, grown, p, verdict)
        return s.finish_trace(trace, [tree.tokens[i] for i in verdict.path] + [verdict.bonus])

    def _record(self, s: Session, trace: StepTrace, grown, p: torch.Tensor, verdict) -> None:
        tree = grown.tree
        visited = {ROOT, *verdict.path}
        accepted = set(verdict.path)
        p_rows = p.gather(1, torch.tensor([tree.tokens], device=p.device).expand(p.shape[0], -1))  # (1+n, n)
        for i in range(len(tree)):
            parent = tree.parents[i]
            status = "accepted" if i in accepted else "rejected" if parent in visited else "unreached"
            trace.nodes.append(DraftNode(tree.tokens[i], s.text_of(tree.tokens[i]), parent, tree.depths[i],
                                         tree.q[i], tree.scores[i], float(p_rows[parent + 1, i]), status))
        trace.accepted_path = list(verdict.path)
        trace.choices = [TargetChoice(at, tok, s.text_of(tok), prob) for at, tok, prob in verdict.choices]
        trace.levels = grown.levels
        for c in grown.pruned:
            c.text = s.text_of(c.token_id)
        trace.pruned = grown.pruned
        trace.draft_stop = grown.stop
        trace.details = {"policy": self.name, **{k: v for k, v in vars(self.policy).items() if k != "name"},
                         "nodes": len(tree), "budget_counts_root": False}


def build_tree_method(name: str, N: int = 60, K: int = 10, mu: float = 0.03, k_init: int = 1, depth: int = 8,
                      **_ignored) -> TreeMethod:
    if name == "talon":
        return TreeMethod(TalonPolicy(N=N, K=K, mu=mu, k_init=k_init))
    if name == "static":
        return TreeMethod(StaticPolicy(N=N, K=K, depth=depth))
    raise ValueError(f"unknown tree method '{name}'")
