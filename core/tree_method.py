"""Tree speculative decoding on any drafter: a policy (chain, static, TALON) shapes the tree from the
drafter's q, one target forward verifies it. A chain is a K = 1 tree, so this is the one step loop of
every drafted method but SpecBound (which drafts with the target's own layers)."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from core import knobs
from core.auto_budget import AutoState
from core.cost_model import measure
from core.drafters import Drafter
from core.tree_policies import ChainPolicy, GrowResult, StaticPolicy, TalonPolicy
from core.engine import Session, Timer
from core.sampling import draw, probs
from core.shape_calibration import T_GRID, nll_by_temperature
from core.trace import ROOT, DraftNode, StepTrace, TargetChoice, TreeStep
from core.draft_tree import DraftTree, tree_attention_mask, tree_positions
from core.verify import TreeVerdict, verify_chain_sampling, verify_tree

Policy = ChainPolicy | StaticPolicy | TalonPolicy


class Expander:
    """The policy's view of the drafter: one batched forward per level, timed, turned into q.

    Trees shape with the drafter's own distribution softmax(z / T_shape) whatever the sampling
    temperature (verification does not depend on q); a chain uses the sampling distribution, since its
    tokens are drawn from it and the rejection rule needs that q."""

    def __init__(self, drafter: Drafter, s: Session, chain: bool, shape_temperature: float,
                 keep_logits: bool = False) -> None:
        self.drafter, self.s, self.chain, self.T_shape = drafter, s, chain, shape_temperature
        self.ms = 0.0
        self.logits: dict[int, torch.Tensor] | None = {} if keep_logits else None  # node -> (V,) z it was expanded with

    def __call__(self, frontier: list[int], tree: DraftTree) -> torch.Tensor | None:
        if len(frontier) > self.drafter.room():
            return None
        with Timer(self.s.target.device) as t:
            z = self.drafter.propose(frontier, tree)  # (F, V)
            if self.logits is not None:
                self.logits.update(zip(frontier, z))
            if self.chain:
                q = probs(z, self.s.sampling)
            else:
                q = torch.softmax(z.float() / self.T_shape, -1)
            q = torch.nan_to_num(q)  # a row of -inf (nothing to propose) -> all zeros
        self.ms += t.ms
        return q


@dataclass
class TreeMethod:
    policy: Policy
    shape_temperature: float = 1.0  # T_shape: the policy sees softmax(z / T_shape); ours, not the papers'
    auto: bool = False  # choose N per step for this machine (core/auto_budget.py); policy.N is the cap
    needs_draft: bool = True

    def __post_init__(self) -> None:
        self.shape_temperature = knobs.SHAPE_T.check(self.shape_temperature)
        if self.auto and isinstance(self.policy, ChainPolicy):
            raise ValueError("auto chooses a tree's node budget N: use it with static or talon")

    @property
    def name(self) -> str:
        return self.policy.name

    @property
    def scratch(self) -> int:
        """Cache slots a step may write beyond the committed text (pending tokens + nodes)."""
        return self.policy.scratch + 2

    def step(self, s: Session) -> StepTrace:
        trace = s.new_trace()
        drafter = s.drafter
        chain = isinstance(self.policy, ChainPolicy)
        pending, base = s.pending(s.tcache), s.tcache.length
        P = len(pending)
        policy, auto, T_shape = self.policy, None, self.shape_temperature
        if self.auto:  # 0. the budget for this machine, from the cost curves and the run's acceptance so far
            if "auto" not in s.state:
                cost = measure(s.target, drafter)
                setup = f"{cost.key}|{self.policy}|{self.shape_temperature}|{s.sampling.temperature}|{s.sampling.top_p}"
                s.state["auto"] = AutoState.start(cost, self.policy.N, setup, self.shape_temperature)
            auto = s.state["auto"].choose(s.traces)
            policy, T_shape = replace(self.policy, N=auto.N), auto.T_shape or T_shape
        # 1. draft: the policy grows the tree, one batched drafter forward per level
        t0 = time.perf_counter()
        drafter.begin(s.ids)
        calibrate = auto is not None and s.state["auto"].wants_calibration()
        expand = Expander(drafter, s, chain, T_shape, keep_logits=calibrate)
        pick = None if s.sampling.greedy else (lambda q: draw(q, s.gen))
        room = s.tcache.max_len - base - P  # tree nodes the target's cache can take this step
        grown = policy.grow(expand, max_depth=s.remaining - 1, max_nodes=room, pick=pick)
        trace.build_ms = (time.perf_counter() - t0) * 1000 - expand.ms
        trace.draft_ms, trace.delta = expand.ms, grown.forwards
        tree = grown.tree
        # 2. verify: one target forward over [pending, tree] with the tree attention mask
        with Timer(s.target.device) as t_verify:
            mask = tree_attention_mask(tree.parents, base, P, s.target.device)
            positions = list(range(base, base + P)) + tree_positions(tree.depths, base + P)
            out = s.target.forward(pending + tree.tokens, positions, s.tcache, mask=mask, taps=drafter.taps)
            logits = out.logits[P - 1:]  # (1 + n, V): row 0 the root, row 1 + i node i
            p = probs(logits, s.sampling)
            if chain and not s.sampling.greedy:
                verdict = chain_verdict(tree, grown, p, s)
            else:
                verdict = verify_tree(tree.children(), logits, p, s.sampling.greedy, s.gen)
        trace.verify_ms, trace.target_forwards = t_verify.ms, 1
        # 3. commit: keep the accepted path's K/V in the target's cache, drop the rest
        s.tcache.compact([base + P + i for i in verdict.path], start=base + P)
        self._record(s, trace, grown, p, verdict, drafter.name, policy, T_shape)
        if expand.logits is not None:  # auto: how likely the target's choices were under q at each T
            trace.tree.t_nll, trace.tree.t_nll_rows = choice_nll(expand.logits, verdict, grown.pool_index, p,
                                                                  s.sampling.greedy)
        s.finish_trace(trace, [tree.tokens[i] for i in verdict.path] + [verdict.bonus])
        # 4. tell the drafter what was accepted (and the target's states there, when it reads them)
        feats = None
        if out.taps is not None:
            feats = out.taps[torch.tensor(list(range(P)) + [P + i for i in verdict.path], device=out.taps.device)]
        drafter.accept([grown.pool_index[i] for i in verdict.path], feats)
        trace.auto = auto
        return trace

    def _record(self, s: Session, trace: StepTrace, grown: GrowResult, p: torch.Tensor, verdict: TreeVerdict,
                drafter: str, policy: Policy, T_shape: float) -> None:
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
        trace.drafter = drafter
        trace.score_sum = sum(tree.scores)
        knobs = {k: v for k, v in vars(policy).items() if k != "name"}  # the N this step used (auto: its choice)
        trace.tree = TreeStep(self.name, **knobs, nodes=len(tree), shape_temperature=T_shape,
                              residual=verdict.residual)


def choice_nll(logits: dict[int, torch.Tensor], verdict: TreeVerdict, pool_index: list[int], p: torch.Tensor,
               greedy: bool) -> tuple[list[float], int]:
    """The calibration evidence of one step: at the root and at each accepted node (the points whose
    prefix the target confirmed) that the drafter expanded, what the target chose there against the
    drafter's z (a leaf was never expanded: it says nothing). p: (1 + n, V), row 1 + i node i."""
    rows, targets = [], []
    for at, tok, _ in verdict.choices:
        node = ROOT if at == ROOT else pool_index[at]
        if node in logits:
            rows.append(logits[node])
            targets.append(tok if greedy else p[at + 1])
    if not rows:
        return [0.0] * len(T_GRID), 0
    return nll_by_temperature(torch.stack(rows), torch.tensor(targets) if greedy else torch.stack(targets))


def chain_verdict(tree: DraftTree, grown: GrowResult, p: torch.Tensor, s: Session) -> TreeVerdict:
    """The standard rejection rule for a sampled chain (residual max(0, p - q) on the first rejection),
    in the tree walk's terms."""
    q = torch.stack(grown.q_rows) if grown.q_rows else p[:0]  # (γ, V)
    v = verify_chain_sampling(tree.tokens, q, p, s.gen)
    choices = [(i - 1 if i else ROOT, tree.tokens[i], float(p[i, tree.tokens[i]])) for i in range(v.accepted)]
    choices.append((v.accepted - 1 if v.accepted else ROOT, v.bonus, float(p[v.accepted, v.bonus])))
    return TreeVerdict(list(range(v.accepted)), choices, residual=v.residual)


def build_tree_method(name: str, **given) -> TreeMethod:
    """A tree method from its declared knobs (core/knobs.py): defaults filled, every value checked."""
    k = knobs.resolve(name, given) if name in ("chain", "static", "talon") else None
    if name == "talon":
        policy = TalonPolicy(N=k["N"], K=k["K"], mu=k["mu"], k_init=k["k_init"])
    elif name == "static":
        policy = StaticPolicy(N=k["N"], K=k["K"], depth=k["depth"])
    elif name == "chain":
        return TreeMethod(ChainPolicy(gamma=k["gamma"]))
    else:
        raise ValueError(f"unknown tree method '{name}'")
    return TreeMethod(policy, k["shape_temperature"], bool(k["auto"]))
