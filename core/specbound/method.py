"""SpecBound: the target drafts with its own shallow layers (exit heads), then verifies exactly.

A step, as the paper's algorithm box:
1. draft token after token (core/specbound/draft.py): each token runs its layers to the next check until
   its annealed confidence max softmax(z^(ℓ)/T_ℓ) reaches τ_exit (ACT, core/specbound/annealing.py); the block ends at a
   token that reaches d_max layers without exiting, after w_max drafted tokens, at EOS, or when the length
   budget is used up (BSCS);
2. verify: one staggered pass through every layer drafting did not compute (core/specbound/block.py), then the
   chain rule (greedy: the longest agreeing prefix; sampling: the rejection rule with the residual);
3. commit the accepted tokens and the bonus token;
4. the trace, built last.

Checks happen at d_max and at the chosen exit layers below it from ℓ_min: every layer (`all`, the paper's),
the set stored with the heads (`stored`: measured fastest by `cli.tune_specbound --choose-exit-layers`), or
a list. δ is counted in full-forward equivalents and includes the exit checks: (layers computed while
drafting + exit-head evaluations × h) / L, where h is one check's cost in layers, measured on this model
and device; so R = τ / (1 + cδ) with c = 1 stays honest and comparable with other methods.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from core import knobs
from core.engine import Session, Timer
from core.model.exit_heads import ExitHeads, check_head_kind, exit_vocab, heads_for
from core.model.layer_heads import LayerHeads
from core.sampling import probs
from core.specbound.annealing import CheckCost, check_cost
from core.specbound.block import Block, VerifyPass, staggered_verify
from core.specbound.display import fill_unchecked
from core.specbound.draft import DraftPlan, draft_block
from core.trace import SpecBoundStep, StepTrace
from core.verify import ChainVerdict, record_chain, verify_chain_greedy, verify_chain_sampling

ExitLayers = tuple[int, ...] | str  # a list of layers, "all" or "stored"


def check_layers(chosen: ExitLayers, stored: tuple[int, ...] | None, min_exit: int, d_max: int) -> tuple[int, ...]:
    """The layers with an exit check: the chosen ones from ℓ_min up to d_max, and always d_max itself (a
    token that reaches d_max without exiting ends the block, so every d_max bounds the drafts). "stored":
    the set stored with the heads (every layer where they have none); "all": every layer."""
    if chosen == "stored":
        chosen = stored or "all"
    below = {ell for ell in range(min_exit, d_max) if chosen == "all" or ell in chosen}
    return tuple(sorted(below | {d_max}))


@dataclass
class SpecBoundMethod:
    alpha: float = knobs.ALPHA.default
    tau_exit: float = knobs.TAU_EXIT.default
    d_max: int = knobs.D_MAX.default  # clamped to L
    w_max: int | None = knobs.W_MAX.default  # None = unbounded
    min_exit_layer: int = knobs.MIN_EXIT.default
    heads: ExitHeads | LayerHeads | None = None  # None: the target's heads of kind `exit_heads`
    exit_layers: ExitLayers = knobs.EXIT_LAYERS.default
    record_raw: bool = True  # compute the raw confidence for the trace's raw view (the bench turns it off)
    record_layers: bool = False  # also read the exit heads at layers without a check, for the page only
    # (core/specbound/display.py; build_specbound_method turns it on with record_raw)
    exit_vocab: int = knobs.EXIT_VOCAB.default  # V_exit: checks over the most frequent tokens only (0: all)
    exit_heads: str = knobs.EXIT_HEADS.default  # paper | shared | lens (core/model/exit_heads.heads_for)
    name: str = "specbound"
    needs_draft: bool = False
    scratch: int = 4

    def prepare(self, s: Session) -> None:
        """Before the first timed step: one check's and the final head's cost in layers (measured together, once
        per model, heads and V_exit)."""
        check_cost(s.target, self.heads_of(s.target), self.exit_vocab)

    def heads_of(self, lm) -> ExitHeads | LayerHeads:
        return self.heads or heads_for(lm, self.exit_heads)

    def plan(self, s: Session) -> DraftPlan:
        """This step's bounds and checks (d_max clamped to L, ℓ_min to d_max; w_max to the length budget,
        keeping room for the bonus token)."""
        lm = s.target
        heads = self.heads_of(lm)
        d_max = min(self.d_max, lm.num_layers)
        checks = check_layers(self.exit_layers, heads.exit_layers, min(self.min_exit_layer, d_max), d_max)
        w_limit = min(self.w_max or math.inf, s.remaining - 1)
        return DraftPlan(heads, self.alpha, self.tau_exit, d_max, checks, exit_vocab(lm, self.exit_vocab),
                         w_limit, self.w_max, self.record_raw)

    @torch.inference_mode()
    def step(self, s: Session) -> StepTrace:
        lm, cache = s.target, s.tcache
        plan = self.plan(s)
        block = Block.start(cache.length, s.pending(cache))
        # 1. draft token after token through the shallow layers (ACT exits, BSCS bounds)
        with Timer(lm.device) as t_draft:
            draft_block(lm, cache, plan, block, s.sampling, s.gen, s.text_of)
        # 2. verify: one staggered pass through every layer not computed exactly; row i predicts drafted[i]
        with Timer(lm.device) as t_verify:
            passed = staggered_verify(lm, cache, block, keep=self.record_layers)
            logits = lm.head(passed.rows)  # (w + 1, V)
            p = probs(logits, s.sampling)  # (w + 1, V)
            verdict = self.verdict(block, logits, p, s)
        # 3. commit: every block slot now holds exact K/V; keep the committed ones (the bonus is fed next step)
        cache.rollback(block.base + block.n_pending + verdict.accepted)
        kept = s.commit(block.drafted[: verdict.accepted] + [verdict.bonus])
        # 4. for the page only, timed apart: every layer's confidence where no check ran
        display_ms = self.show_layers(plan, block, passed, s) if self.record_layers else 0.0
        # 5. the trace, finished last: the drafted chain, the target's choices, the exits and the layers' cost
        q = [float(qi[tok]) for qi, tok in zip(block.q, block.drafted)]
        record = record_chain(block.drafted, q, p, verdict, s.text_of)
        cost = check_cost(lm, plan.heads, self.exit_vocab)
        return s.step_trace(kept, draft_ms=t_draft.ms, verify_ms=t_verify.ms, target_forwards=1,
                            delta=(block.layers + block.head_evals * cost.layers) / lm.num_layers, nodes=record.nodes,
                            accepted_path=record.accepted_path, choices=record.choices, exits=block.exits,
                            draft_stop=block.stop, display_ms=display_ms,
                            specbound=self.record(plan, block, passed, len(kept), cost, lm.num_layers,
                                                  verdict.residual))

    @staticmethod
    def show_layers(plan: DraftPlan, block: Block, passed: VerifyPass, s: Session) -> float:
        """The exit heads read at the layers without a check (core/specbound/display.py); its milliseconds,
        which the step's timing leaves out."""
        with Timer(s.target.device) as t:
            fill_unchecked(s.target, plan, block, passed, s.text_of)
        return t.ms

    @staticmethod
    def verdict(block: Block, logits: torch.Tensor, p: torch.Tensor, s: Session) -> ChainVerdict:
        """The chain rule: greedy, the longest prefix the target agrees with; sampling, the rejection rule."""
        if s.sampling.greedy:
            return verify_chain_greedy(block.drafted, logits)
        q = torch.stack(block.q) if block.q else p[:0]  # (w, V)
        return verify_chain_sampling(block.drafted, q, p, s.gen)

    def record(self, plan: DraftPlan, block: Block, passed: VerifyPass, tau: int, cost: CheckCost, L: int,
               residual: bool) -> SpecBoundStep:
        """The knobs this step ran with and what its layers cost (δ's parts, in layers; `cost`: one check's and
        the final head's, measured)."""
        h_cost = cost.layers
        computed = block.layers + passed.layers
        equivalent = computed + block.head_evals * h_cost  # the checks in layers too, as δ counts them
        return SpecBoundStep(
            self.alpha, self.tau_exit, plan.d_max, self.w_max, min(self.min_exit_layer, plan.d_max), plan.heads.kind,
            L, exit_layers=list(plan.checks), layers_draft=block.layers, layers_verify=passed.layers,
            layers_computed=computed, layers_full_equivalent=tau * L, layers_equivalent=equivalent,
            compute_saved=1 - equivalent / max(1, tau * L),
            head_evals=block.head_evals, head_cost_layers=h_cost, layers_joined=block.joined,
            verify_from_layer=passed.from_layer, residual=residual,
            exit_vocab=0 if plan.vocab is None else len(plan.vocab), d_max_asked=self.d_max,
            final_head_layers=cost.final_layers,
            exact_depths=block.depth[block.n_pending - 1: block.n_pending - 1 + len(block.exits)],
            head_agreement=list(plan.heads.agreement or []),
            lens_agreement=list(getattr(plan.heads, "lens_agreement", None) or []))


def parse_exit_layers(text: str) -> ExitLayers:
    """'all', 'stored' or comma-separated layer numbers ('2,4'; ';' works too) -> the method's value."""
    text = text.strip().lower()
    if text in ("all", "stored"):
        return text
    try:
        layers = tuple(sorted({int(x) for x in text.replace(";", ",").split(",") if x.strip()}))
    except ValueError:
        raise ValueError(f"exit layers must be 'all', 'stored' or comma-separated layer numbers "
                         f"(got {text!r})") from None
    if not layers or layers[0] < 1:
        raise ValueError(f"exit layers must be layer numbers >= 1 (got {text!r})")
    return layers


def build_specbound_method(record_raw: bool = True, **given) -> SpecBoundMethod:
    """A SpecBound method from its declared knobs (core/knobs.py, and a `preset` of them), each checked with a
    user-facing message. d_max above L means L; w_max = 0 means unbounded. Other methods' knobs are ignored."""
    k = knobs.resolve("specbound", given)
    check_head_kind(k["exit_heads"])
    if k["min_exit_layer"] > k["d_max"]:
        raise ValueError(f"the lowest exit layer ℓ_min ({k['min_exit_layer']}) must be <= d_max ({k['d_max']})")
    return SpecBoundMethod(alpha=k["alpha"], tau_exit=k["tau_exit"], d_max=k["d_max"], w_max=k["w_max"] or None,
                           min_exit_layer=k["min_exit_layer"], exit_layers=parse_exit_layers(k["exit_layers"] or "all"),
                           record_raw=bool(record_raw), record_layers=bool(record_raw), exit_vocab=k["exit_vocab"],
                           exit_heads=k["exit_heads"])
