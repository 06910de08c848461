"""What a step did, as plain Python (no tensors): it deep-copies into UI state, saves to JSON and
renders without a model. The engine fills these; viz/ draws them; nothing re-derives them."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from core.trace_check import ROOT, TraceFormatError, TraceLimits, check_tree, record  # noqa: F401 (re-exported)


@dataclass
class DraftNode:
    """One drafted token. Chains are trees whose node i has parent i - 1."""
    token_id: int
    text: str
    parent: int  # index into StepTrace.nodes, or ROOT
    depth: int  # 0 = first drafted token after the committed text
    q: float  # draft probability of this token given its path
    score: float  # p(u): product of q along the path
    p: float | None = None  # target probability of this token at its parent, when the target saw the parent
    status: str = "unreached"  # accepted | rejected | unreached (target never got to its parent)


@dataclass
class TargetChoice:
    """What the target picked at one visited point of the walk (ROOT or a node index)."""
    at: int
    token_id: int
    text: str
    p: float  # target probability of the picked token


@dataclass
class PrunedCandidate:
    """A child the tree policy scored but did not keep (drawn faintly in the app)."""
    token_id: int
    text: str
    parent: int  # node index or ROOT
    depth: int
    q: float
    score: float  # p(u)
    reason: str  # gate | budget | topk (static frontier) | rerank (static final Top-N)


@dataclass
class LevelTrace:
    """One depth of tree growth: one batched draft forward over the frontier."""
    depth: int
    frontier: int  # parents expanded at this depth (1 at depth 0: the root)
    candidates: int  # children scored (per parent only the best few can survive)
    kept: int
    anchor: float | None = None  # TALON m_d = max p(u) over the pooled candidates
    gate: float | None = None  # TALON μ·m_d
    cut_by_gate: int = 0
    cut_by_budget: int = 0
    cut_by_topk: int = 0
    budget_left: int = 0  # N - |T| after this level


@dataclass
class ExitTrace:
    """SpecBound: one drafted token's pass through the shallow layers and where it exited."""
    node: int  # index into StepTrace.nodes; len(nodes) for the token that hit d_max (it was not drafted)
    layers: list[int]  # layers evaluated, 1-based ℓ (exit heads sit after layer ℓ)
    raw_conf: list[float]  # max softmax(z^(ℓ)) per evaluated layer
    annealed_conf: list[float]  # max softmax(z^(ℓ) / T_ℓ)
    temperature: list[float]  # T_ℓ = 1 + α(1 - ℓ/L)
    top_ids: list[int]  # argmax of z^(ℓ) per evaluated layer
    top_texts: list[str]
    exit_layer: int | None  # None: reached d_max layers without exiting (drafting stopped)
    # Shown only (the page's faint cells): the exit head read at layers 1..L where no check ran, from the token's
    # own drafting state up to its last check and from the verification's exact state above it. Never used to draft.
    unchecked_layers: list[int] = field(default_factory=list)
    unchecked_raw: list[float] = field(default_factory=list)  # max softmax(z^(ℓ))
    unchecked_annealed: list[float] = field(default_factory=list)  # max softmax(z^(ℓ) / T_ℓ)
    unchecked_top_texts: list[str] = field(default_factory=list)  # argmax of z^(ℓ)


@dataclass
class AutoChoice:
    """`auto` budget: the N (and T_shape) this step used, and why (predicted tokens/s of the candidates it
    weighed)."""
    N: int
    reason: str
    predicted: list[tuple[int, float]] = field(default_factory=list)  # (N, predicted tokens/s)
    T_shape: float | None = None  # the shaping temperature fitted to the run (core/auto/shape_calibration.py)


@dataclass
class TreeStep:
    """Chain, static and TALON: the knobs this step ran with, as data (auto: the budget it chose), and what it
    built. A knob declared in core/knobs.py and carried by the policy lands here without a field of its own."""
    policy: str  # chain | static | talon
    knobs: dict[str, float] = field(default_factory=dict)  # the policy's knobs (N, K, mu, k_init, depth or gamma)
    # and shape_temperature, the T_shape the tree saw (verification is untouched)
    nodes: int = 0  # drafted nodes in the verified tree
    t_nll: list[float] = field(default_factory=list)  # auto: Σ −log softmax(z/T)[target's choice] per T of
    # core.auto.shape_calibration.T_GRID, over this step's choices where the drafter's z was computed
    t_nll_rows: int = 0  # how many choices that sum is over
    residual: bool = False  # sampled chain: the bonus came from the residual max(0, p − q)
    mu_schedule: str = "fixed"  # TALON: fixed, or adaptive (knobs["mu"] is then the μ this step used)

    def knob(self, name: str) -> float | None:
        return self.knobs.get(name)


@dataclass
class SpecBoundStep:
    """SpecBound: the knobs this step ran with and what its layers cost (δ's parts, in layers)."""
    alpha: float
    tau_exit: float
    d_max: int
    w_max: int
    min_exit_layer: int
    heads: str  # paper (per-layer heads) | trained (shared-head adapters) | logit-lens
    num_layers: int  # L
    exit_layers: list[int] = field(default_factory=list)  # layers with an exit check
    layers_draft: int = 0  # layer passes spent drafting
    layers_verify: int = 0  # layer passes of the verification
    layers_computed: int = 0  # layer passes, drafting and verification
    layers_full_equivalent: int = 0  # τ·L: what AR would have run for the committed tokens
    compute_saved: float = 0.0  # 1 − layers_equivalent / layers_full_equivalent: negative when the step cost more
    layers_equivalent: float = 0.0  # layers_computed + head_evals · head_cost_layers: everything the step ran, in
    # layers (0 in older exports, whose compute_saved left the checks out)
    head_evals: int = 0  # exit-head checks made
    head_cost_layers: float = 0.0  # one check's cost in layer equivalents (measured)
    layers_joined: int = 0  # (token, layer) pairs drafting ran for earlier tokens carried along by a deeper one
    verify_from_layer: int = 0  # verification reused the draft's layers below this one
    residual: bool = False
    exit_vocab: int | None = None  # V_exit the checks scored (their softmax is over these tokens, but for layer
    # L's); 0: the whole vocabulary; None: not recorded (older exports)
    d_max_asked: int = 0  # the d_max knob as given (d_max above is clamped to L); 0 in older exports
    head_agreement: list[float] = field(default_factory=list)  # held-out top-1 agreement with the last layer of the
    # heads it exits through, per layer ℓ = 1..L−1, from their training record; empty when unknown (the lens)
    lens_agreement: list[float] = field(default_factory=list)  # the same for the logit lens on the same held-out
    # text (what the layers gave before the heads were trained); empty when not recorded
    final_head_layers: float = 0.0  # λ: the final norm and LM head over one token, in layers (measured); 0 in older
    # exports
    exact_depths: list[int] = field(default_factory=list)  # per exit record, the layers its token had computed
    # (exactly) when verification took it over; empty in older exports (their depths were prefix minima)


@dataclass
class StepTrace:
    index: int
    method: str
    context_len: int  # committed tokens (prompt included) before this step
    nodes: list[DraftNode] = field(default_factory=list)
    accepted_path: list[int] = field(default_factory=list)  # node indices, root downwards
    choices: list[TargetChoice] = field(default_factory=list)  # the last one is the bonus token
    committed_ids: list[int] = field(default_factory=list)  # what the step appended (after EOS/length cuts)
    committed_texts: list[str] = field(default_factory=list)
    tau: int = 0  # tokens committed
    delta: float = 0  # draft forwards spent (SpecBound: layers computed while drafting / L, a fraction)
    target_forwards: int = 0
    build_ms: float = 0.0  # tree-shaping logic alone
    draft_ms: float = 0.0  # draft forwards
    verify_ms: float = 0.0  # target forward + acceptance walk
    step_ms: float = 0.0  # the whole step's wall time (prefill excluded); 0 in exports from before it was kept
    stop_reason: str | None = None  # eos | length | context, when the session ended here
    display_ms: float = 0.0  # work inside the step done only for the page (SpecBound's unchecked layers), kept out
    # of step_ms
    levels: list[LevelTrace] = field(default_factory=list)  # tree policies: one record per depth grown
    pruned: list[PrunedCandidate] = field(default_factory=list)  # best cut candidates per depth (not all of them)
    exits: list[ExitTrace] = field(default_factory=list)  # SpecBound: one per drafted token (+ the one that hit d_max)
    draft_stop: str | None = None  # why drafting stopped: d_max | w_max | eos | length | gamma | budget | frontier | context
    drafter: str = ""  # who proposed the tree: model | eagle3 | lookup ("" for AR and SpecBound)
    score_sum: float | None = None  # Σ p(u) over the verified tree: the drafter's own estimate of accepted tokens
    auto: AutoChoice | None = None  # when the budget is chosen per step (`auto`)
    tree: TreeStep | None = None  # chain / static / TALON
    specbound: SpecBoundStep | None = None

    @property
    def accepted(self) -> int:
        return len(self.accepted_path)

    def budget(self) -> tuple[int | None, str]:
        """The cap on drafted tokens this step had, and its symbol: auto's N, N, γ or w_max."""
        if self.auto is not None:
            return self.auto.N, "auto"
        if self.tree is not None:
            return (self.tree.knob("gamma"), "γ") if self.tree.policy == "chain" else (self.tree.knob("N"), "N")
        if self.specbound is not None:
            return self.specbound.w_max, "w_max"
        return None, ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, what: str = "the step", limits: TraceLimits = TraceLimits()) -> StepTrace:
        """The inverse of to_dict (an exported trace read back): every field checked against its type and
        `limits`, the tree against its invariants (core/trace_check.py). Unknown keys are ignored (older
        exports carry a few); a missing field or a wrong value is a TraceFormatError naming it."""
        step = record(cls, d, what, limits)
        check_tree(step, what, limits)
        return step


@dataclass
class GenerationResult:
    method: str
    prompt_ids: list[int]
    output_ids: list[int]
    text: str
    traces: list[StepTrace]
    wall_s: float
    stop_reason: str | None

    @property
    def steps(self) -> int:
        return len(self.traces)

    @property
    def mat(self) -> float:
        return len(self.output_ids) / max(1, self.steps)

    @property
    def draft_forwards(self) -> float:
        """Σδ: whole draft forwards for trees, layer-equivalent fractions for SpecBound."""
        return sum(t.delta for t in self.traces)

    @property
    def target_forwards(self) -> int:
        return sum(t.target_forwards for t in self.traces)

    @property
    def mean_delta(self) -> float:
        return self.draft_forwards / max(1, self.steps)
