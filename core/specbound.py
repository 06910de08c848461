"""SpecBound: the target drafts with its own shallow layers (exit heads), then verifies exactly.

Drafting (ACT + BSCS). Token after token, the last token is pushed through layers ℓ = 1, 2, ...
and after each layer ℓ ≥ min_exit_layer its exit head gives z^(ℓ); with T_ℓ = 1 + α(1 − ℓ/L)
the token exits at the first layer where max softmax(z^(ℓ)/T_ℓ) ≥ τ_exit and the next token
is drafted from q = softmax(z^(ℓ)) (argmax when greedy). Drafting stops when a token reaches
d_max layers without exiting, after w_max drafted tokens, at EOS, or when the length budget
is used up. A token that reaches layer L always exits there (there is nothing deeper), so
d_max = L disables the depth bound.

Exactness. A token's layer-ℓ output is exact only if its own input to ℓ is exact and every
earlier token's layer-ℓ K/V are exact. While drafting, a token at layer ℓ sees earlier block
tokens that exited below ℓ through K/V computed from their exit states (CALM's state
propagation: cheap and inexact, for drafting only). So token j's first e_j layers are exact
only up to x_j = min(e_0, ..., e_j) (a prefix minimum of the drafting depths e). Every token keeps its hidden states h^0..h^(e_j).
Verification is one staggered parallel pass: at layer i it runs the suffix of block tokens
with x_j ≤ i (x is non-increasing, so it is a suffix that grows as i rises), each token joining
with its stored exact state h^(x_j); tokens with x_j > i keep their exact K/V in the cache.
The pass starts at the shallowest inexact layer min_j x_j and computes every layer of every
token that was not computed exactly, so the final logits are the target's own (up to the
last-bit noise of a different batch shape, as with any verification forward).

Compute. δ is counted in full-forward equivalents and includes the exit checks: (layers computed while
drafting + exit-head evaluations × h) / L, where h is one head evaluation's cost in layers, measured on
this model and device (a head is an LM-head matmul, which on a narrow model with a big vocabulary costs
several layers). So R = τ / (1 + cδ) with c = 1 stays honest and comparable with other methods. `trace.specbound`
also holds the layers of the verification pass and the layers AR would spend for the same τ.
Checks happen only at the exit layers (`exit_layers`; by default the set stored with the heads, measured
fastest on held-out prompts by `cli.tune_specbound --choose-exit-layers`, else every layer from
min_exit_layer to d_max; "all" forces every layer).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import torch

from core import knobs
from core.cost_model import median_ms
from core.engine import Session, Timer
from core.exit_heads import ExitHeads, exit_vocab, heads_for
from core.kv_cache import KVCache
from core.model import CausalLM, causal_mask
from core.sampling import choose, probs
from core.trace import ROOT, DraftNode, ExitTrace, SpecBoundStep, StepTrace, TargetChoice
from core.verify import verify_chain_greedy, verify_chain_sampling

# Defaults (declared in core/knobs.py) measured on the embedded 12-layer target with its trained heads (python -m cli.tune_specbound,
# docs/bench/specbound_tune.md, re-tuned on the LayerSkip-trained target in docs/bench/specbound.md). That model
# is rarely confident, hence the low τ_exit; α = 0.5 lifts drafted-token acceptance well above α = 0's; d_max = 4
# keeps failed drafts and head evaluations cheap; V_exit = 1024 halves a check again and lets more
# drafts through than 2048 (MAT 1.92 vs 1.75 at the same speed); min_exit_layer = 2 skips layer 1, whose head
# agrees with the final layer on only 23% of tokens. Sharper models want a higher τ_exit and d_max nearer L/3.
DEFAULTS = {k: v for k, v in knobs.defaults("specbound").items() if k != "exit_layers"}


def act_temperature(layer: int, num_layers: int, alpha: float) -> float:
    """T_ℓ = 1 + α(1 − ℓ/L): shallow layers are deflated more, the last layer not at all."""
    return 1.0 + alpha * (1.0 - layer / num_layers)


@dataclass
class LayerConfidence:
    layer: int
    temperature: float  # T_ℓ
    raw: float  # max softmax(z^(ℓ))
    annealed: float  # max softmax(z^(ℓ) / T_ℓ)
    top_id: int


def layer_confidence(z: torch.Tensor, layer: int, num_layers: int, alpha: float, raw: bool = True) -> LayerConfidence:
    """z: (V,) exit-head logits after layer ℓ. The raw (un-annealed) confidence is only for the trace's raw
    view: with raw=False it is not computed (NaN), sparing a softmax per check."""
    t = act_temperature(layer, num_layers, alpha)
    annealed = float(torch.softmax(z.float() / t, -1).max())
    raw_conf = float(torch.softmax(z.float(), -1).max()) if raw else math.nan
    return LayerConfidence(layer, t, raw_conf, annealed, int(z.argmax()))


@functools.lru_cache(maxsize=8)
@torch.inference_mode()
def head_cost_layers(lm: CausalLM, heads: ExitHeads, v_exit: int = 0, reps: int = 25) -> float:
    """One exit-head evaluation over one token (over the V_exit most frequent tokens; 0: all), in units of
    one decoder layer over one token (measured)."""
    vocab = exit_vocab(lm, v_exit)
    h = lm.embed(torch.tensor([1], device=lm.device))  # (1, d)
    cache = lm.new_cache(64)
    pos = torch.tensor([32], device=lm.device)
    mask = torch.ones(1, 33, dtype=torch.bool, device=lm.device)
    t_layer = median_ms(lambda: lm.forward_layers(h, pos, cache, 32, mask, 0, 1), reps)
    t_head = median_ms(lambda: heads.logits(lm, 1, h, vocab), reps)
    return t_head / t_layer


def exits_at(conf: LayerConfidence, tau_exit: float) -> bool:
    return conf.annealed >= tau_exit


@dataclass
class Block:
    """The tokens of one step: pending (committed, not cached) then drafted; token j sits at slot base + j."""
    base: int
    tokens: list[int]
    n_pending: int
    depth: list[int] = field(default_factory=list)  # e_j: layers computed while drafting
    kv_depth: list[int] = field(default_factory=list)  # layers whose K/V the slot holds (computed or propagated)
    hidden: list[list[torch.Tensor]] = field(default_factory=list)  # hidden[j][ℓ]: (d,) after ℓ layers
    drafted: list[int] = field(default_factory=list)
    q: list[torch.Tensor] = field(default_factory=list)  # (V,) the distribution drafted[i] came from
    exits: list[ExitTrace] = field(default_factory=list)
    stop: str = ""
    layers: int = 0  # layer passes spent drafting
    head_evals: int = 0
    propagated: int = 0  # (token, layer) K/V pairs propagated from exit states

    def add(self, tokens: list[int]) -> None:
        self.tokens += tokens
        self.depth += [0] * len(tokens)
        self.kv_depth += [0] * len(tokens)
        self.hidden += [[] for _ in tokens]

    @property
    def exact_depth(self) -> list[int]:
        """x_j = min(e_0, ..., e_j): how many layers of token j were computed exactly."""
        return [min(self.depth[: j + 1]) for j in range(len(self.tokens))]


def propagate_kv(lm: CausalLM, cache: KVCache, i: int, h: torch.Tensor, slots: torch.Tensor) -> None:
    """Layer i's K/V for tokens that exited below it, from their exit states h (n, d) (CALM's state
    propagation): a cheap stand-in so deeper drafts still see them. Slots equal positions here."""
    cos, sin = lm.rope(slots, h)  # (n, D)
    k, v = lm.project_kv(i, lm.layers[i].input_layernorm(h), cos, sin)  # each (H_kv, n, D)
    cache.k[i, :, slots] = k
    cache.v[i, :, slots] = v


def draft_mask(block: Block, g0: int, g1: int, layer: int, device: torch.device) -> torch.Tensor:
    """(T_g, base + g1) for running layer `layer` (1-based) on block tokens [g0, g1): the cached prefix,
    earlier block tokens whose slot holds K/V of this layer, and the group itself causally."""
    done = torch.tensor([block.kv_depth[j] >= layer for j in range(g0)], dtype=torch.bool, device=device)  # (g0,)
    mask = causal_mask(block.base + g0, g1 - g0, device)  # (T_g, base + g1)
    mask[:, block.base: block.base + g0] = done
    return mask


@dataclass
class SpecBoundMethod:
    alpha: float = DEFAULTS["alpha"]
    tau_exit: float = DEFAULTS["tau_exit"]
    d_max: int = DEFAULTS["d_max"]  # clamped to L; L = no depth bound
    w_max: int | None = DEFAULTS["w_max"]  # None = unbounded
    min_exit_layer: int = DEFAULTS["min_exit_layer"]
    heads: ExitHeads | None = None  # None: the target's trained heads, else the logit lens
    propagate: bool = True  # deeper drafts see shallower-exited tokens through propagated K/V (else masked)
    exit_layers: tuple[int, ...] | str | None = None  # layers with an exit check; None: the set stored with
    # the heads (measured best by cli.tune_specbound --choose-exit-layers), else every layer min_exit..d_max;
    # "all": every layer min_exit..d_max
    record_raw: bool = True  # compute the raw confidence for the trace's raw view (the bench turns it off)
    exit_vocab: int = 0  # V_exit: exit checks over the most frequent tokens only (0: the whole vocabulary)
    name: str = "specbound"
    needs_draft: bool = False
    scratch: int = 4

    @torch.inference_mode()
    def step(self, s: Session) -> StepTrace:
        lm, cache = s.target, s.tcache
        L = lm.num_layers
        heads = self.heads or heads_for(lm)
        d_max = min(self.d_max, L)
        min_exit = min(self.min_exit_layer, d_max)
        trace = s.new_trace()
        block = Block(cache.length, [], 0)
        block.add(s.pending(cache))
        block.n_pending = len(block.tokens)
        w_limit = min(self.w_max or math.inf, s.remaining - 1)  # the bonus token always fits
        # 1. draft token after token through the shallow layers (ACT exits, BSCS bounds)
        with Timer(lm.device) as t_draft:
            self._draft(s, heads, block, w_limit, d_max, min_exit)
        # 2. one staggered pass through every layer not computed exactly; rows predict drafted[i] and the bonus
        with Timer(lm.device) as t_verify:
            final, verify_layers, start_layer = self._verify(lm, cache, block)
            logits = lm.head(final)  # (w + 1, V)
            p = probs(logits, s.sampling)
            drafted = block.drafted
            if s.sampling.greedy:
                verdict = verify_chain_greedy(drafted, logits)
            else:
                q = torch.stack(block.q) if block.q else p[:0]  # (w, V)
                verdict = verify_chain_sampling(drafted, q, p, s.gen)
        trace.draft_ms, trace.verify_ms = t_draft.ms, t_verify.ms
        h_cost = head_cost_layers(lm, heads, self.exit_vocab)
        trace.delta, trace.target_forwards = (block.layers + block.head_evals * h_cost) / L, 1
        # 3. record the drafted chain, what the target chose, and the per-layer exits
        a = verdict.accepted
        score = 1.0
        for i, tok in enumerate(drafted):
            qi = float(block.q[i][tok])
            score *= qi
            status = "accepted" if i < a else "rejected" if i == a else "unreached"
            trace.nodes.append(DraftNode(tok, s.text_of(tok), i - 1 if i else ROOT, i, qi, score,
                                         float(p[i, tok]), status))
        trace.accepted_path = list(range(a))
        trace.choices = [TargetChoice(ROOT if i == 0 else i - 1, drafted[i], trace.nodes[i].text, trace.nodes[i].p)
                         for i in range(a)]
        trace.choices.append(TargetChoice(a - 1 if a else ROOT, verdict.bonus, s.text_of(verdict.bonus),
                                          float(p[a, verdict.bonus])))
        trace.exits, trace.draft_stop = block.exits, block.stop
        # 4. every block slot now holds exact K/V; keep the committed ones (the bonus is fed next step)
        cache.rollback(block.base + block.n_pending + a)
        s.finish_trace(trace, drafted[:a] + [verdict.bonus])
        computed = block.layers + verify_layers
        trace.specbound = SpecBoundStep(
            self.alpha, self.tau_exit, d_max, self.w_max, min_exit, heads.kind, L,
            exit_layers=sorted(self._checks(heads, d_max, min_exit)), layers_draft=block.layers,
            layers_verify=verify_layers,
            layers_computed=computed, layers_full_equivalent=trace.tau * L,
            compute_saved=1 - computed / max(1, trace.tau * L), head_evals=block.head_evals, head_cost_layers=h_cost,
            kv_propagated=block.propagated, verify_from_layer=start_layer, residual=verdict.residual)
        return trace

    def _checks(self, heads: ExitHeads, d_max: int, min_exit: int) -> set[int]:
        """Layers with an exit check (the last layer L always exits: nothing is deeper)."""
        allowed = range(min_exit, d_max + 1)
        chosen = heads.exit_layers if self.exit_layers is None else self.exit_layers
        return {ell for ell in allowed if chosen in (None, "all") or ell in chosen}

    def _draft(self, s: Session, heads: ExitHeads, block: Block, w_limit: float, d_max: int, min_exit: int) -> None:
        lm = s.target
        L = lm.num_layers
        checks = self._checks(heads, d_max, min_exit)
        stops = sorted((checks | {L}) & set(range(1, d_max + 1)) | {d_max})  # layers that end a run of layers
        vocab = exit_vocab(lm, self.exit_vocab)  # (V_exit,) sorted ids, or None: every token
        g0, g1 = 0, len(block.tokens)
        while True:
            if len(block.drafted) >= w_limit:
                block.stop = "w_max" if self.w_max and len(block.drafted) >= self.w_max else "length"
                return
            positions = torch.arange(block.base + g0, block.base + g1, device=lm.device)  # (T_g,)
            h = lm.embed(torch.tensor(block.tokens[g0:g1], device=lm.device))  # (T_g, d)
            rope = lm.rope(positions, h)  # once per group, not once per layer
            for j in range(g0, g1):
                block.hidden[j].append(h[j - g0])
            confs: list[LayerConfidence] = []
            exit_logits = None
            layer = 0
            while layer < d_max:
                upto = min(ell for ell in stops if ell > layer)
                if any(block.kv_depth[j] < upto for j in range(g0)):  # an earlier token's K/V stop short of upto:
                    upto = layer + 1  # one layer at a time, propagating (or masking) it as each layer needs
                stale = [j for j in range(g0) if block.kv_depth[j] <= layer] if self.propagate else []
                if stale:
                    states = torch.stack([block.hidden[j][block.depth[j]] for j in stale])  # (n, d)
                    propagate_kv(lm, s.tcache, layer, states, block.base + torch.tensor(stale, device=lm.device))
                    block.propagated += len(stale)
                    for j in stale:
                        block.kv_depth[j] = layer + 1
                mask = draft_mask(block, g0, g1, layer + 1, lm.device)
                outs: list[torch.Tensor] = []
                h = lm.forward_layers(h, positions, s.tcache, block.base + g0, mask, layer, upto,
                                      hidden=outs, rope=rope)  # (T_g, d): layers layer+1..upto (1-based) at once
                block.layers += upto - layer
                layer = upto
                for j in range(g0, g1):
                    block.depth[j] = block.kv_depth[j] = layer
                    block.hidden[j].extend(out[j - g0] for out in outs)
                if layer not in checks and layer != L:
                    continue
                z = heads.logits(lm, layer, h[-1:], vocab)[0]  # (V,); -inf outside the exit vocabulary
                block.head_evals += 1
                conf = layer_confidence(z, layer, L, self.alpha, raw=self.record_raw)
                confs.append(conf)
                if exits_at(conf, self.tau_exit) or layer == L:
                    exit_logits = z
                    break
            exit_layer = confs[-1].layer if exit_logits is not None else None
            block.exits.append(ExitTrace(
                node=len(block.drafted), layers=[c.layer for c in confs], raw_conf=[c.raw for c in confs],
                annealed_conf=[c.annealed for c in confs], temperature=[c.temperature for c in confs],
                top_ids=[c.top_id for c in confs], top_texts=[s.text_of(c.top_id) for c in confs],
                exit_layer=exit_layer))
            if exit_logits is None:
                block.stop = "d_max"
                return
            q = probs(exit_logits, s.sampling)  # (V,)
            tok = choose(exit_logits, q, s.sampling, s.gen)
            block.drafted.append(tok)
            block.q.append(q)
            block.add([tok])
            if tok in lm.eos_ids:
                block.stop = "eos"
                return
            g0, g1 = g1, g1 + 1

    def _verify(self, lm: CausalLM, cache: KVCache, block: Block) -> tuple[torch.Tensor, int, int]:
        """Final hidden states of block tokens n_pending − 1 .. end: (w + 1, d); layer passes run; first layer run."""
        L, n, base = lm.num_layers, len(block.tokens), block.base
        x = block.exact_depth
        first = x[-1] if n else L
        run: torch.Tensor | None = None
        start = n  # block tokens start.. are in the running pass; earlier ones join when their exact depth is reached
        i = first
        while i < L:
            new_start = start
            while new_start > 0 and x[new_start - 1] <= i:
                new_start -= 1
            if new_start < start:  # these tokens' states are exact up to layer i: they join the pass here
                if i == 0:  # includes the last drafted token, which drafting never fed
                    joiners = lm.embed(torch.tensor(block.tokens[new_start:start], device=lm.device))  # (n_join, d)
                else:
                    joiners = torch.stack([block.hidden[j][i] for j in range(new_start, start)])  # (n_join, d)
                run = joiners if run is None else torch.cat([joiners, run])
                start = new_start
            upto = min(L, x[start - 1]) if start else L  # the next token to join does so at layer upto
            positions = torch.arange(base + start, base + n, device=lm.device)  # (T,)
            mask = causal_mask(base + start, n - start, lm.device)  # (T, base + n)
            run = lm.forward_layers(run, positions, cache, base + start, mask, i, upto)  # (T, d): layers i..upto-1 at once
            i = upto
        exact = [torch.stack([block.hidden[j][L] for j in range(start)])] if start else []  # computed in full
        rows = torch.cat(exact + ([run] if run is not None else []))  # (n, d)
        return rows[block.n_pending - 1:], L - first, first


def build_specbound_method(record_raw: bool = True, **given) -> SpecBoundMethod:
    """A SpecBound method from its declared knobs (core/knobs.py), each checked with a user-facing message.
    d_max above L means L (no depth bound); w_max = 0 means unbounded. Knobs of other methods are ignored."""
    k = knobs.resolve("specbound", given)
    if k["min_exit_layer"] > k["d_max"]:
        raise ValueError(f"the lowest exit layer ({k['min_exit_layer']}) must be <= d_max ({k['d_max']})")
    layers = "all" if k["exit_layers"] == "all" else None
    if k["exit_layers"] not in (None, "", "all"):
        try:
            layers = tuple(sorted({int(x) for x in k["exit_layers"].replace(";", ",").split(",") if x.strip()}))
        except ValueError:
            raise ValueError(f"exit layers must be comma-separated layer numbers (got {k['exit_layers']!r})") from None
        if not layers or layers[0] < 1:
            raise ValueError(f"exit layers must be layer numbers >= 1 (got {k['exit_layers']!r})")
    return SpecBoundMethod(alpha=k["alpha"], tau_exit=k["tau_exit"], d_max=k["d_max"], w_max=k["w_max"] or None,
                           min_exit_layer=k["min_exit_layer"], exit_layers=layers, record_raw=bool(record_raw),
                           exit_vocab=k["exit_vocab"])
