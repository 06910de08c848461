"""Tree speculative decoding on any drafter: a policy (chain, static, TALON) shapes the tree from the
drafter's q, one target forward verifies it. A chain is a K = 1 tree, so this is the one step loop of
every drafted method but SpecBound (which drafts with the target's own layers)."""
from __future__ import annotations

import time
from types import MappingProxyType
from dataclasses import dataclass, fields, replace

import torch

from core import knobs
from core.auto.budget import AutoMemory, AutoState
from core.auto.config import DEFAULT, AutoConfig
from core.auto.cost_model import measure_costs
from core.auto.shape_calibration import T_GRID, nll_by_temperature
from core.draft_tree import DraftTree, tree_attention_mask, tree_positions
from core.drafters.contract import Drafter, widen
from core.drafters.shallow_verify import verify_with_shallow
from core.engine import Session, Timer
from core.sampling import draw, probs
from core.trace import ROOT, AutoChoice, DraftNode, StepTrace, TargetChoice, TreeStep
from core.trees.mu_schedule import ADAPTIVE, FIXED, AdaptiveMu, check_schedule
from core.trees.policies import ChainPolicy, ColumnQ, GrowResult, StaticPolicy, TalonPolicy
from core.verify import (VerdictRecord, record_chain, verify_chain_greedy, verify_chain_sampling,
                         verify_tree)

Policy = ChainPolicy | StaticPolicy | TalonPolicy


class Expander:
    """The policy's view of the drafter: one batched forward per level, timed, turned into q.

    Trees shape with the drafter's own distribution softmax(z / T_shape) whatever the sampling
    temperature (verification does not depend on q); a token the drafter can propose keeps q > 0 however
    small T_shape makes it (only a -inf logit means "cannot propose"), so the root always keeps its K
    children. A chain uses the sampling distribution, since its tokens are drawn from it and the rejection
    rule needs that q."""

    def __init__(self, drafter: Drafter, s: Session, chain: bool, shape_temperature: float,
                 keep_logits: bool = False, most_kept: int | None = None) -> None:
        self.drafter, self.s, self.chain, self.T_shape = drafter, s, chain, shape_temperature
        self.most_kept = most_kept  # the most children a policy keeps from one row (None: any number)
        self.ms = 0.0
        self.logits: dict[int, torch.Tensor] | None = {} if keep_logits else None  # node -> (V,) z it was expanded with

    def __call__(self, frontier: list[int], tree: DraftTree) -> torch.Tensor | ColumnQ | None:
        if len(frontier) > self.drafter.room():
            return None
        columns, V = self.drafter.columns, self.s.target.vocab_size
        with Timer(self.s.target.device) as t:
            z = self.drafter.propose(frontier, tree)  # (F, C) over `columns`, or (F, V)
            if self.logits is not None:
                self.logits.update(zip(frontier, widen(z, columns, V)))
            if self.chain:  # its q rows go to the rejection rule, which reads them over V
                q = torch.nan_to_num(probs(widen(z, columns, V), self.s.sampling))  # a row of -inf -> zeros
            else:
                q = torch.softmax(z.float() / self.T_shape, -1)  # (F, C): the columns outside have q = 0
                if self.underflow_may_matter(q):  # a 0 from -inf cannot be proposed, one from underflow can
                    q.clamp_min_(torch.finfo(q.dtype).tiny).masked_fill_(z.isneginf() | z.isnan(), 0.0)
                if columns is not None:
                    q = ColumnQ(q, columns)
        self.ms += t.ms
        return q

    def underflow_may_matter(self, q: torch.Tensor) -> bool:
        """Only a row with fewer positive q than the policy may keep can reach a zero in its Top-m: the (F, V)
        passes of the fix are skipped otherwise (a draft vocabulary's -inf makes zeros on every row). With no
        known cap, any zero may matter."""
        positive = (q > 0).sum(-1)  # (F,)
        return int(positive.min()) < (q.shape[-1] if self.most_kept is None else self.most_kept)


@dataclass
class Drafted:
    grown: GrowResult
    draft_ms: float
    build_ms: float  # the policy's own logic, forwards excluded
    logits: dict[int, torch.Tensor] | None  # auto's calibration steps: node -> the z it was expanded with


@dataclass
class Verified:
    p: torch.Tensor  # (1 + n, V): row 0 the root, row 1 + i node i
    record: VerdictRecord
    taps: torch.Tensor | None  # the target's hidden states at its taps, (P + n, ·), for drafters that read them
    ms: float


@dataclass
class TreeMethod:
    policy: Policy
    shape_temperature: float = 1.0  # T_shape: the policy sees softmax(z / T_shape); ours, not the papers'
    auto: bool = False  # choose N per step for this machine (core/auto/budget.py); policy.N is the cap
    auto_config: AutoConfig = DEFAULT
    auto_memory: AutoMemory | None = None  # opt-in memory across sessions (the CLI and the bench, never the app)
    mu_schedule: str = FIXED  # adaptive: μ moved after each verification (core/trees/mu_schedule.py); TALON only
    needs_draft: bool = True

    def __post_init__(self) -> None:
        self.shape_temperature = knobs.SHAPE_T.check(self.shape_temperature)
        if self.auto and isinstance(self.policy, ChainPolicy):
            raise ValueError("auto chooses a tree's node budget N: use it with static or talon")
        if check_schedule(self.mu_schedule) == ADAPTIVE and not isinstance(self.policy, TalonPolicy):
            raise ValueError("an adaptive μ schedule moves TALON's gate: use it with talon")

    @property
    def name(self) -> str:
        return self.policy.name

    @property
    def scratch(self) -> int:
        """Cache slots a step may write beyond the committed text (pending tokens + nodes)."""
        return self.policy.scratch + 2

    def prepare(self, s: Session) -> None:
        """Before the first timed step (the session calls this when it is built): auto's state, from this
        machine's cost curves, measured here when no earlier session or program warm-up has (core/auto/cost_model)."""
        if self.auto:
            cost = measure_costs(s.target, s.drafter)
            setup = f"{cost.key}|{self.policy}|{self.shape_temperature}|{s.sampling.temperature}|{s.sampling.top_p}"
            s.state.auto = AutoState.start(cost, self.policy.N, self.shape_temperature, self.auto_config,
                                              self.auto_memory, setup)

    def step(self, s: Session) -> StepTrace:
        base, pending = s.tcache.length, s.pending(s.tcache)
        P = len(pending)
        # 0. auto: the budget and T_shape for this machine, from the cost curves and the run's acceptance so far
        auto = s.state.auto.choose_budget(s.traces) if self.auto else None
        policy = replace(self.policy, N=auto.N) if auto else self.policy
        if self.mu_schedule == ADAPTIVE:  # this session's μ, moved by the steps before
            if s.state.mu is None:
                s.state.mu = policy.mu
            policy = replace(policy, mu=s.state.mu)
        T_shape = (auto.T_shape or self.shape_temperature) if auto else self.shape_temperature
        # 1. draft: the policy grows the tree, one batched drafter forward per level
        drafted = self.draft(s, policy, T_shape, calibrate=auto is not None and s.state.auto.wants_calibration())
        tree = drafted.grown.tree
        # 2. verify: one target forward over [pending, tree] with the tree attention mask
        verified = self.verify(s, drafted.grown, pending, base)
        # 3. commit: keep the accepted path's K/V in the target's cache, drop the rest; tell the drafter
        path = verified.record.accepted_path
        s.tcache.compact([base + P + i for i in path], start=base + P)
        kept = s.commit([tree.tokens[i] for i in path] + [verified.record.choices[-1].token_id])
        feats = None
        if verified.taps is not None:
            feats = verified.taps[torch.tensor(list(range(P)) + [P + i for i in path], device=verified.taps.device)]
        s.drafter.accept([drafted.grown.pool_index[i] for i in path], feats)
        if self.mu_schedule == ADAPTIVE:
            s.state.mu = AdaptiveMu().next(policy.mu, path, drafted.grown.levels, drafted.grown.pruned,
                                              verified.record.choices[-1].token_id)
        # 4. the trace, finished last
        return s.step_trace(kept, **self.trace_fields(s, drafted, verified, policy, T_shape, auto))

    def draft(self, s: Session, policy: Policy, T_shape: float, calibrate: bool) -> Drafted:
        chain = isinstance(policy, ChainPolicy)
        t0 = time.perf_counter()
        s.drafter.begin(s.ids)
        expand = Expander(s.drafter, s, chain, T_shape, keep_logits=calibrate, most_kept=policy.scratch)
        pick = None if s.sampling.greedy else (lambda q: draw(q, s.gen))
        room = s.tcache.max_len - s.tcache.length - len(s.pending(s.tcache))  # tree nodes the cache can take
        grown = policy.grow(expand, max_depth=s.remaining - 1, max_nodes=room, pick=pick)
        return Drafted(grown, expand.ms, (time.perf_counter() - t0) * 1000 - expand.ms, expand.logits)

    def verify(self, s: Session, grown: GrowResult, pending: list[int], base: int) -> Verified:
        """Chains by the chain rule (greedy: the longest agreeing prefix; sampling: the rejection rule with
        the residual), trees by the target's walk (core/verify.py)."""
        tree, P = grown.tree, len(pending)
        with Timer(s.target.device) as t:
            mask = tree_attention_mask(tree.parents, base, P, s.target.device)
            positions = list(range(base, base + P)) + tree_positions(tree.depths, base + P)
            shallow = s.drafter.shallow(base, grown.pool_index)  # a self drafter's first ℓ layers of these rows
            if shallow is not None:
                out = verify_with_shallow(s.target, pending + tree.tokens, positions, s.tcache, base, mask, shallow)
                taps = None
            else:
                out = s.target.forward(pending + tree.tokens, positions, s.tcache, mask=mask, taps=s.drafter.taps)
                taps = out.taps
            logits = out.logits[P - 1:]  # (1 + n, V): row 0 the root, row 1 + i node i
            p = probs(logits, s.sampling)
            if isinstance(self.policy, ChainPolicy):
                if s.sampling.greedy:
                    verdict = verify_chain_greedy(tree.tokens, logits)
                else:
                    q = torch.stack(grown.q_rows) if grown.q_rows else p[:0]  # (γ, V)
                    verdict = verify_chain_sampling(tree.tokens, q, p, s.gen)
                record = record_chain(tree.tokens, tree.q, p, verdict, s.text_of)
            else:
                record = record_tree(tree, p, verify_tree(tree.children(), logits, p, s.sampling.greedy, s.gen),
                                     s.text_of)
        return Verified(p, record, taps, t.ms)

    def trace_fields(self, s: Session, drafted: Drafted, verified: Verified, policy: Policy, T_shape: float,
               auto: AutoChoice | None) -> dict:
        """The step's trace fields: timings, the verdict, the levels and cuts, the knobs it ran with."""
        grown, record = drafted.grown, verified.record
        for c in grown.pruned:
            c.text = s.text_of(c.token_id)
        t_nll, rows = [], 0
        if drafted.logits is not None:  # auto: how likely the target's choices were under q at each T
            t_nll, rows = choice_nll(drafted.logits, record.choices, grown.pool_index, verified.p, s.sampling.greedy)
        policy_knobs = {k: v for k, v in vars(policy).items() if k != "name"}  # the N this step used (auto: its choice)
        tree_step = TreeStep(self.name, {**policy_knobs, "shape_temperature": T_shape}, nodes=len(grown.tree),
                             t_nll=t_nll, t_nll_rows=rows, residual=record.residual, mu_schedule=self.mu_schedule)
        return dict(build_ms=drafted.build_ms, draft_ms=drafted.draft_ms, delta=grown.forwards, verify_ms=verified.ms,
                    target_forwards=1, nodes=record.nodes, accepted_path=record.accepted_path, choices=record.choices,
                    levels=grown.levels, pruned=grown.pruned, draft_stop=grown.stop, drafter=s.drafter.name,
                    score_sum=sum(grown.tree.scores), tree=tree_step, auto=auto)


def record_tree(tree: DraftTree, p: torch.Tensor, verdict, text_of) -> VerdictRecord:
    """A tree walk's verdict as trace records: a node is accepted on the path, rejected when the target
    visited its parent and chose otherwise, unreached below."""
    visited, accepted = {ROOT, *verdict.path}, set(verdict.path)
    p_rows = p.gather(1, torch.tensor([tree.tokens], device=p.device).expand(p.shape[0], -1))  # (1 + n, n)
    nodes = []
    for i, parent in enumerate(tree.parents):
        status = "accepted" if i in accepted else "rejected" if parent in visited else "unreached"
        nodes.append(DraftNode(tree.tokens[i], text_of(tree.tokens[i]), parent, tree.depths[i], tree.q[i],
                               tree.scores[i], float(p_rows[parent + 1, i]), status))
    choices = [TargetChoice(at, tok, text_of(tok), prob) for at, tok, prob in verdict.choices]
    return VerdictRecord(nodes, list(verdict.path), choices, verdict.residual)


def choice_nll(logits: dict[int, torch.Tensor], choices: list[TargetChoice], pool_index: list[int], p: torch.Tensor,
               greedy: bool) -> tuple[list[float], int]:
    """The calibration evidence of one step: at the root and at each accepted node (the points whose
    prefix the target confirmed) that the drafter expanded, what the target chose there against the
    drafter's z (a leaf was never expanded: it says nothing). p: (1 + n, V), row 1 + i node i."""
    rows, targets = [], []
    for c in choices:
        node = ROOT if c.at == ROOT else pool_index[c.at]
        if node in logits:
            rows.append(logits[node])
            targets.append(c.token_id if greedy else p[c.at + 1])
    if not rows:
        return [0.0] * len(T_GRID), 0
    return nll_by_temperature(torch.stack(rows), torch.tensor(targets) if greedy else torch.stack(targets))


def build_tree_method(name: str, auto_config: AutoConfig = DEFAULT, auto_memory: AutoMemory | None = None,
                      **given) -> TreeMethod:
    """A tree method from its declared knobs (core/knobs.py, and a `preset` of them): defaults filled, every
    value checked. auto_config / auto_memory: auto's settings and its opt-in memory across sessions."""
    if name not in POLICIES:
        raise ValueError(f"unknown tree method '{name}'")
    k = knobs.resolve(name, given)
    kind = POLICIES[name]
    policy = kind(**{f.name: k[f.name] for f in fields(kind) if f.name in k})  # the knobs it declares
    if name == "chain":
        return TreeMethod(policy)
    return TreeMethod(policy, k["shape_temperature"], bool(k["auto"]), auto_config, auto_memory,
                      k.get("mu_schedule") or FIXED)


POLICIES = MappingProxyType({"talon": TalonPolicy, "static": StaticPolicy, "chain": ChainPolicy})  # read-only
