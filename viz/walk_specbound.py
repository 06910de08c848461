"""The walk's stages of a SpecBound step: the rule (ACT's annealed threshold, BSCS's bounds), then per drafted
token which layers it ran and its raw and annealed confidence against τ_exit at each check, why drafting
stopped (d_max, w_max), the one staggered verification, and the target's verdict."""
from __future__ import annotations

from core.trace import ExitTrace, StepTrace
from viz.exits_fig import STOP_WHY, tau_exit_of
from viz.walk_parts import ExitPicture, Part, Quote, Stage, Tok

MAX_CHECKS = 6  # checks quoted one by one per token; the picture shows them all


def specbound_stages(t: StepTrace) -> list[Stage]:
    out = [rule_stage(t)]
    out += [token_stage(t, i) for i in range(len(t.exits))]
    out += [stop_stage(t), verify_stage(t), verdict_stage(t)]
    return out


def sb(t: StepTrace, name: str, spec: str = "g") -> Quote:
    return Quote(None if t.specbound is None else getattr(t.specbound, name), f"specbound.{name}", spec)


def rule_stage(t: StepTrace) -> Stage:
    checks = ", ".join(map(str, t.specbound.exit_layers)) if t.specbound and t.specbound.exit_layers else "none"
    w_max = t.specbound.w_max if t.specbound is not None else None
    bound: list[Part] = (["; and w_max = ", sb(t, "w_max", "d"), " drafted tokens end it too."] if w_max else
                         ["; no w_max bounds how many are drafted."])
    parts: list[Part] = [
        "The step starts after ", Quote(t.context_len, "context_len", "d"), " committed tokens. SpecBound drafts "
        "with the target's own first layers: each token runs layer by layer, and at each checked layer (here ",
        checks, "; d_max always) an exit head reads its state. It exits at the first check where the annealed "
        "confidence max softmax(z/T_ℓ) reaches τ_exit = ", sb(t, "tau_exit"),
        ", with T_ℓ = 1 + α(1 − ℓ/L), α = ",
        sb(t, "alpha"), ", L = ", sb(t, "num_layers", "d"), ": shallow layers, sure of themselves and often wrong, "
        "are flattened more. A token that reaches d_max = ", sb(t, "d_max", "d"), " layers without exiting ends the "
        "block", *bound]
    return Stage("The rule", tuple(parts), ExitPicture("heatmap", 0),
                 "SpecBound drafts with the target's own first layers, and lets each token stop early once a layer "
                 "is confident enough.")


def checks(t: StepTrace, i: int, e: ExitTrace) -> list[Part]:
    """'ℓ = 1: raw 0.70 → annealed 0.63 (T_ℓ = 1.88) < τ_exit; …' for its checks (the first and last few)."""
    tau = tau_exit_of(t)
    shown = list(range(len(e.layers)))
    if len(shown) > MAX_CHECKS:
        shown = shown[: MAX_CHECKS // 2] + [-1] + shown[-MAX_CHECKS // 2:]
    parts: list[Part] = []
    for k in shown:
        if k < 0:
            parts.append("…; ")
            continue
        f = f"exits.{i}"
        parts += ["ℓ = ", Quote(e.layers[k], f"{f}.layers.{k}", "d"), ": raw ",
                  Quote(e.raw_conf[k], f"{f}.raw_conf.{k}"),
                  " → annealed ", Quote(e.annealed_conf[k], f"{f}.annealed_conf.{k}"), " (T_ℓ = ",
                  Quote(e.temperature[k], f"{f}.temperature.{k}"), ") ",
                  "≥ τ_exit" if e.annealed_conf[k] >= tau else "< τ_exit", "; "]
    return parts


def outcome(t: StepTrace, i: int, e: ExitTrace) -> list[Part]:
    if e.exit_layer is None:
        return ["no check reached τ_exit by d_max = ", sb(t, "d_max", "d"), " layers: a hard token. It is not "
                "drafted, and drafting stops here."]
    parts: list[Part] = ["it exits at ℓ = ", Quote(e.exit_layer, f"exits.{i}.exit_layer", "d")]
    if 0 <= e.node < len(t.nodes):
        n = t.nodes[e.node]
        parts += [" and drafts ", Tok(n.text), " (q = ", Quote(n.q, f"nodes.{e.node}.q"), ")"]
    if e.annealed_conf and e.annealed_conf[-1] < tau_exit_of(t):
        parts.append(", since layer L, the target's own head, always exits")
    return parts + ["."]


def token_stage(t: StepTrace, i: int) -> Stage:
    e = t.exits[i]
    depth = max(e.layers, default=0)
    parts: list[Part] = [f"Token {i + 1} ran ", Quote(depth, f"exits.{i}.layers.-1", "d"), " layer(s), checked at ",
                         Quote(len(e.layers), f"exits.{i}.layers#", "d"), " of them: ", *checks(t, i, e),
                         *outcome(t, i, e)]
    if e.unchecked_layers:
        parts += [" The faint cells are the head read at the ", Quote(len(e.unchecked_layers),
                  f"exits.{i}.unchecked_layers#", "d"), " layers without a check, shown only (the deepest, ℓ = ",
                  Quote(e.unchecked_layers[-1], f"exits.{i}.unchecked_layers.-1", "d"), ", would give ",
                  Quote(e.unchecked_annealed[-1], f"exits.{i}.unchecked_annealed.-1"), ")."]
    lead = (f"Token {i + 1} runs layer by layer until a check is confident enough to exit." if e.exit_layer is not None
            else f"Token {i + 1} found no layer confident enough before d_max: a hard token, so drafting stops.")
    return Stage(f"Token {i + 1}", tuple(parts), ExitPicture("heatmap", i + 1, i), lead)


def stop_stage(t: StepTrace) -> Stage:
    """Why drafting stopped: BSCS's bounds, or EOS and the length limit."""
    stop = t.draft_stop
    parts: list[Part] = ["Drafting stops after ", Quote(len(t.nodes), "nodes#", "d"), " drafted token(s): "]
    if stop == "d_max":
        parts += ["a token reached d_max = ", sb(t, "d_max", "d"), " layers without exiting. A token the shallow "
                  "layers cannot settle is likely wrong too, so the block is verified now."]
    elif stop == "w_max":
        parts += ["w_max = ", sb(t, "w_max", "d"), " tokens were drafted in a row, the bound on one block: a longer "
                  "block is rarely accepted whole."]
    else:
        parts.append(f"{STOP_WHY.get(stop or '', stop or 'no reason was recorded')}.")
    return Stage("Why drafting stopped", tuple(parts), ExitPicture("heatmap", len(t.exits)),
                 "Drafting stops at a token too hard to settle early, or when the block is long enough.")


def step_cost(t: StepTrace) -> list[Part]:
    """What the step computed, its exit checks counted in layers (issue 46: a 'saved' share that left them out
    claimed 46% where the step cost 98% of plain decoding), against what plain decoding of its tokens runs."""
    s = t.specbound
    if s is None or not s.layers_equivalent:  # an older export: its layer passes only, and no claim
        return ["In all the step ran ", sb(t, "layers_computed", "d"), " layer passes (its exit checks were not "
                "recorded in layers)."]
    parts: list[Part] = [
        "In all the step computed ", sb(t, "layers_computed", "d"), " layer passes and ", sb(t, "head_evals", "d"),
        " exit checks of ", sb(t, "head_cost_layers", ".2g"), " layer each: ", sb(t, "layers_equivalent", ".1f"),
        " layer equivalents, where plain decoding of its ", Quote(t.tau, "tau", "d"), " token(s) runs τ·L = ",
        sb(t, "layers_full_equivalent", "d")]
    if s.compute_saved >= 0:
        return parts + [": ", sb(t, "compute_saved", ".0%"), " less."]
    return parts + [": this step computed more than plain decoding would have."]


def verify_stage(t: StepTrace) -> Stage:
    parts: list[Part] = [
        "One staggered verification pass: the drafted tokens go through the layers they skipped, each joining at "
        "the depth it was computed exactly, from layer ", sb(t, "verify_from_layer", "d"), " up: ",
        sb(t, "layers_verify", "d"), " layer passes. ", *step_cost(t), " δ = ", Quote(t.delta, "delta", ".3g"),
        " full forwards of drafting, exit checks included. Every committed token has now been through all L "
        "layers: in the picture each token's drafting layers (grey: layers it was carried along while a later token drafted "
        "deeper, so that token saw exact keys and values), and hatched above them the layers this one pass "
        "computed for it: no layer is computed twice."]
    return Stage("Verification", tuple(parts), ExitPicture("verify"),
                 "One pass runs every layer the drafted tokens skipped, so each has been through all L layers.")


def verdict_stage(t: StepTrace) -> Stage:
    a = len(t.accepted_path)
    parts: list[Part] = ["The target agrees with the first ", Quote(a, "accepted_path#", "d"), " drafted token(s)"]
    if a < len(t.nodes):
        n = t.nodes[a]
        parts += ["; at token ", str(a + 1), " the draft had ", Tok(n.text), " (q = ", Quote(n.q, f"nodes.{a}.q")]
        parts += [", target p = ", Quote(n.p, f"nodes.{a}.p")] if n.p is not None else []
        parts.append("): rejected")
    if t.choices:
        k = len(t.choices) - 1
        parts += [". The target's own token ", Tok(t.choices[k].text), " (p = ",
                  Quote(t.choices[k].p, f"choices.{k}.p"),
                  ") is the bonus"]
    parts += [": τ = ", Quote(t.tau, "tau", "d"), " token(s) committed."]
    miss = a if a < len(t.nodes) and t.nodes[a].p is not None else None
    return Stage("The verdict", tuple(parts), ExitPicture("bars", compare=miss),
                 "The target keeps the drafted tokens it agrees with, up to the first it would not have chosen, "
                 "and adds one of its own.")
