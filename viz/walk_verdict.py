"""The walk's verdict stages of a tree step: the tree as grown (the budget spent), the one verification pass,
the target's walk down the accepted path with p against q where it stopped, the bonus token, and the static
tree drafted from the same prefix for comparison."""
from __future__ import annotations

from core.trace import ROOT, StepTrace
from viz.exits_fig import why_stopped
from viz.tree_fig import Reveal
from viz.walk_parts import Part, Quote, Stage, Tok, TreePicture, deepest, hidden, policy

MAX_WALKED = 6  # accepted nodes named one by one; longer paths are summed up


def cap_of(t: StepTrace) -> list[Part]:
    """' of N = 60' (or γ): the cap the drafted nodes count against."""
    if t.tree is None:
        return []
    if policy(t) == "chain":
        return [" of γ = ", Quote(t.tree.knob("gamma"), "tree.knobs.gamma", "d")]
    return [" of N = ", Quote(t.tree.knob("N"), "tree.knobs.N", "d")]


def levels_grown(t: StepTrace) -> list[Part]:
    """', one per level grown': and where the verified tree is shallower than the levels grown (a static tree's
    final rerank can leave its deepest level out), says so, so δ and the levels drawn never disagree."""
    if not t.levels:
        return [", one per level."]
    kept = deepest(t)
    parts: list[Part] = [", one per level grown (", Quote(len(t.levels), "levels#", "d"), " levels, d = 0…",
                         Quote(t.levels[-1].depth, "levels.-1.depth", "d"), ")"]
    if kept < t.levels[-1].depth:
        parts += ["; the final rerank kept nodes down to d = ", str(kept), " only, so the picture shows ",
                  str(kept + 1), " level(s): the deeper levels' candidates were drafted and paid for, but none "
                  "made the best N"]
    return parts + ["."]


def grown_stage(t: StepTrace) -> Stage:
    """The tree as the drafter left it: how much of the budget it spent, and why growth stopped."""
    why = why_stopped(t)
    why = why if why.endswith(".") else why[:1].upper() + why[1:] + "."
    parts: list[Part] = ["The tree holds |T| = ", Quote(len(t.nodes), "nodes#", "d"),
                         " drafted nodes", *cap_of(t), ", for δ = ", Quote(t.delta, "delta", "g"),
                         " draft forwards", *levels_grown(t), f" {why}"]
    if t.score_sum is not None:
        parts += [" Σp(u) = ", Quote(t.score_sum, "score_sum", ".3g"), " is the drafter's own estimate of how many "
                  "of them the target will accept."]
    return Stage("Budget spent", tuple(parts), hidden(deepest(t)),
                 "The tree is complete: these are the guesses the target will check.")


def verify_stage(t: StepTrace) -> Stage:
    """One target forward over the whole tree."""
    parts: list[Part] = [
        "One verification pass: the target reads the root and all ", Quote(len(t.nodes), "nodes#", "d"),
        " drafted nodes in ", Quote(t.target_forwards, "target_forwards", "d"), " forward, each node attending only "
        "to its own ancestors (a tree attention mask; a node's position is the prefix length + its depth). It took ",
        Quote(t.verify_ms, "verify_ms", ".1f"), " ms here, acceptance walk included, and gives the target's own "
        "distribution p at every node, so every node's verdict comes out of this one pass: the accepted path is "
        "lit, the rejected nodes are crossed"]
    miss = rejected_at(t)
    if miss is not None:
        n = t.nodes[miss]
        parts += [", and where the path ends the draft's favourite ", Tok(n.text), " had q = ",
                  Quote(n.q, f"nodes.{miss}.q"), " where the target gives it p = ", Quote(n.p, f"nodes.{miss}.p")]
    parts.append(".")
    return Stage("Verification", tuple(parts), TreePicture(Reveal(verdicts=True, bonus=False, compare=compared(t))),
                 "One target forward reads the whole tree at once and judges every node in it.")


def rejected_at(t: StepTrace) -> int | None:
    """The draft's favourite child where the accepted path ends, when the target judged it (its p is known)."""
    last = t.accepted_path[-1] if t.accepted_path else ROOT
    children = [i for i, n in enumerate(t.nodes) if n.parent == last]
    best = max(children, key=lambda i: t.nodes[i].q, default=None)
    return best if best is not None and t.nodes[best].p is not None else None


def compared(t: StepTrace) -> tuple[int, ...]:
    miss = rejected_at(t)
    return () if miss is None else (miss,)


def choice_at(t: StepTrace, at: int) -> int | None:
    """The index of the target's choice recorded at `at` (ROOT or a node)."""
    return next((k for k, c in enumerate(t.choices) if c.at == at), None)


def name_of(t: StepTrace, at: int) -> list[Part]:
    return ["the root"] if at == ROOT else [Tok(t.nodes[at].text)]


def walked(t: StepTrace) -> list[Part]:
    """'at the root it chooses 'a' (p = 0.7), drafted: accepted; at 'a' …' for the first few accepted nodes."""
    parts: list[Part] = []
    for i in t.accepted_path[:MAX_WALKED]:
        k = choice_at(t, t.nodes[i].parent)
        if k is None:
            continue
        parts += ["at ", *name_of(t, t.nodes[i].parent), " it chooses ", Tok(t.choices[k].text), " (p = ",
                  Quote(t.choices[k].p, f"choices.{k}.p"), "), a drafted child (q = ",
                  Quote(t.nodes[i].q, f"nodes.{i}.q"),
                  "): accepted; "]
    if len(t.accepted_path) > MAX_WALKED:
        parts.append(f"… {len(t.accepted_path) - MAX_WALKED} more accepted the same way; ")
    return parts


def stopped(t: StepTrace) -> list[Part]:
    """Where the walk ends: p against q at the first rejection, or a leaf."""
    last = t.accepted_path[-1] if t.accepted_path else ROOT
    children = [i for i, n in enumerate(t.nodes) if n.parent == last]
    if not t.choices:
        return ["the target recorded no choice."]
    if not children:
        return [*name_of(t, last), " has no drafted child: every drafted token on this path was accepted."]
    best = max(children, key=lambda i: t.nodes[i].q)
    n = t.nodes[best]
    parts: list[Part] = ["at ", *name_of(t, last), " it chooses ", Tok(t.choices[-1].text), " (p = ",
                         Quote(t.choices[-1].p, f"choices.{len(t.choices) - 1}.p"), "), which none of its ",
                         str(len(children)), " drafted children is: the draft's favourite there, ", Tok(n.text),
                         ", had q = ", Quote(n.q, f"nodes.{best}.q")]
    if n.p is not None:
        parts += [" but the target gives it p = ", Quote(n.p, f"nodes.{best}.p")]
    return parts + [": rejected, and everything below it goes unreached."]


def walk_stage(t: StepTrace) -> Stage:
    parts: list[Part] = ["The target accepts ", Quote(len(t.accepted_path), "accepted_path#", "d"),
                         " drafted token(s), walking down from the root: it takes its own choice at each node and "
                         "goes on while that choice is a drafted child: ", *walked(t), *stopped(t)]
    if t.tree is not None and t.tree.residual:
        parts.append(" (A sampled chain: the drafted token was rejected with probability 1 − p/q and the target's "
                     "token drawn from the residual max(0, p − q).)")
    focus = tuple(t.accepted_path) + compared(t)
    return Stage("The walk down", tuple(parts), TreePicture(Reveal(verdicts=True, bonus=False, focus=focus,
                                                                  compare=compared(t))),
                 "The target keeps the longest path of guesses it agrees with, and stops at the first it would "
                 "not have chosen.")


def bonus_stage(t: StepTrace, shadow: StepTrace | None) -> Stage:
    """The target's own token after the accepted path: why τ ≥ 1 always."""
    if not t.choices:
        return Stage("The bonus token", ("This step recorded no bonus token.",), TreePicture(Reveal()),
                     "The target adds one token of its own after the accepted guesses.")
    k = len(t.choices) - 1
    parts: list[Part] = ["The bonus token: at ", *name_of(t, t.choices[k].at), " the target's own choice ",
                         Tok(t.choices[k].text), " (p = ", Quote(t.choices[k].p, f"choices.{k}.p"),
                         ") is committed after the ", Quote(len(t.accepted_path), "accepted_path#", "d"),
                         " accepted drafts, so this step commits τ = ", Quote(t.tau, "tau", "d"),
                         " token(s) for δ = ",
                         Quote(t.delta, "delta", "g"), " draft forwards and one target forward."]
    if t.stop_reason:
        parts.append(f" The run ends here ({t.stop_reason}).")
    if shadow is None and t.method == "talon":
        parts.append(" (The static tree from this prefix was not drafted for this step, so there is no comparison.)")
    return Stage("The bonus token", tuple(parts), TreePicture(Reveal(focus=tuple(t.accepted_path))),
                 "The target adds one token of its own, so every step commits at least one token.")


def static_stage(t: StepTrace, s: StepTrace) -> Stage:
    """The static EAGLE-style tree from the same prefix: its δ is fixed, its τ is whatever it got."""
    more = "more" if t.tau > s.tau else "fewer" if t.tau < s.tau else "as many"
    cost = "fewer" if t.delta < s.delta else "more" if t.delta > s.delta else "as many"
    d = s.tree.knob("depth") if s.tree is not None else None
    kept = deepest(s)
    parts: list[Part] = [
        "The static EAGLE-style tree from the same prefix, with the same drafter and N = ",
        Quote(s.tree.knob("N") if s.tree else None, "shadow.tree.knobs.N", "d"), ", grows the root's Top-K and D = ",
        Quote(d, "shadow.tree.knobs.depth", "d"), " levels below it whatever the context: ",
        Quote(len(s.levels), "shadow.levels#", "d"), " levels, δ = ", Quote(s.delta, "shadow.delta", "g"),
        " draft forwards. Its final rerank keeps the best |T| = ", Quote(len(s.nodes), "shadow.nodes#", "d"),
        f" nodes, down to d = {kept}" + (" (the deeper levels kept none)" if s.levels and kept < s.levels[-1].depth
                                         else "") + "; the target accepted ",
        Quote(len(s.accepted_path), "shadow.accepted_path#", "d"), ": τ = ", Quote(s.tau, "shadow.tau", "d"),
        f". This step's tree committed {more} tokens (τ = ", Quote(t.tau, "tau", "d"), f") with {cost} draft forwards "
        "(δ = ", Quote(t.delta, "delta", "g"), ")."]
    return Stage("The static tree", tuple(parts), TreePicture(Reveal(), shadow=True),
                 "For comparison: the fixed-shape static tree drafted from the same prefix.")
