"""The walk's growth stages of a tree step (chain, static, TALON): where it starts and the rule it grows by,
then each level as the policy grew it, quoting the level's own record (LevelTrace)."""
from __future__ import annotations

from core.trees.mu_schedule import AdaptiveMu

from core.trace import LevelTrace, StepTrace
from viz.walk_parts import Part, Quote, Stage, Tok, at_depth, combined, deepest, hidden, listed, policy

MAX_LEVEL_STAGES = 10  # deeper levels share one stage, so a 60-level chain is not 60 clicks


def start_stage(t: StepTrace) -> Stage:
    """Where the step starts, and the rule its tree will grow by."""
    parts: list[Part] = ["The step starts after ", Quote(t.context_len, "context_len", "d"),
                         " committed tokens; the root of its tree is the last of them"]
    parts += [f", and the {t.drafter} drafter proposes every child. "] if t.drafter else [". "]
    parts += rule(t)
    return Stage("The root", tuple(parts), hidden(-1),
                 "A step drafts a tree of guesses after the text so far; then the target checks them all at once.")


def rule(t: StepTrace) -> list[Part]:
    """The policy's knobs, quoted from this step's record (auto: the N it chose)."""
    tree, kind = t.tree, policy(t)
    if tree is None:
        return ["No tree record: the drafted tokens are shown as they were verified."]
    if kind == "talon":
        auto = " (auto chose it for this step)" if t.auto is not None else ""
        return ["TALON spends a budget of N = ", Quote(tree.knob("N"), "tree.knobs.N", "d"),
                f" drafted nodes{auto}: the first k = ",
                Quote(tree.knob("k_init"), "tree.knobs.k_init", "d"), " level(s) keep the draft's Top-K = ",
                Quote(tree.knob("K"), "tree.knobs.K", "d"),
                "; deeper levels pool every child of the frontier and keep those whose path score p(u) reaches "
                "μ = ", Quote(tree.knob("mu"), "tree.knobs.mu", "g"), " times the level's best, m_d."]
    if kind == "static":
        return ["The static EAGLE-style tree grows D = ", Quote(tree.knob("depth"), "tree.knobs.depth", "d"),
                " levels below the "
                "first whatever the context: each level expands its K = ", Quote(tree.knob("K"), "tree.knobs.K", "d"),
                " best nodes into K×K candidates; at the end the best N = ", Quote(tree.knob("N"), "tree.knobs.N", "d"),
                " of all of them by p(u) are verified."]
    return ["A chain drafts up to γ = ", Quote(tree.knob("gamma"), "tree.knobs.gamma", "d"),
            " tokens one after another, each the drafter's own choice after the one before."]


def level_groups(levels: list[LevelTrace]) -> list[list[int]]:
    """Level indices per stage: one each, the deep tail in one."""
    idx = list(range(len(levels)))
    if len(idx) <= MAX_LEVEL_STAGES:
        return [[i] for i in idx]
    return [[i] for i in idx[: MAX_LEVEL_STAGES - 1]] + [idx[MAX_LEVEL_STAGES - 1:]]


def level_stage(t: StepTrace, group: list[int]) -> Stage:
    if len(group) > 1:
        return tail_stage(t, group)
    k = group[0]
    lv = t.levels[k]
    kind = policy(t)
    if kind == "chain":
        return chain_level(t, k, lv)
    if kind == "static":
        return static_level(t, k, lv)
    return topk_level(t, k, lv) if lv.gate is None else gate_level(t, k, lv)


def lv_quote(k: int, lv: LevelTrace, name: str, spec: str = "d") -> Quote:
    return Quote(getattr(lv, name), f"levels.{k}.{name}", spec)


def lv_sum(k: int, lv: LevelTrace, *terms: tuple[int, str]) -> Quote:
    """A count derived from the level's own fields, e.g. what passed the gate: candidates − cut_by_gate."""
    return combined([(sign, f"levels.{k}.{name}", getattr(lv, name)) for sign, name in terms])


def passed(k: int, lv: LevelTrace) -> Quote:
    """Scored candidates at or above the gate."""
    return lv_sum(k, lv, (1, "candidates"), (-1, "cut_by_gate"))


def unscored(k: int, lv: LevelTrace) -> Quote:
    """Children that pass the gate but were never scored (only each parent's best N − |T| can survive the
    budget, so the policy scores no more): the part of cut_by_budget beyond the scored ones it cut."""
    return lv_sum(k, lv, (1, "cut_by_budget"), (1, "cut_by_gate"), (1, "kept"), (-1, "candidates"))

def topk_level(t: StepTrace, k: int, lv: LevelTrace) -> Stage:
    """TALON's first k levels: Top-K whatever the draft believes."""
    nodes = at_depth(t, lv.depth)
    where = "The root" if lv.depth == 0 else f"Level d = {lv.depth}"
    parts: list[Part] = [
        f"{where}'s Top-K: one draft forward over the frontier of ", lv_quote(k, lv, "frontier"),
        " node(s) scores ", lv_quote(k, lv, "candidates"), " candidates, and TALON keeps the best K = ",
        lv_quote(k, lv, "kept"), " whatever the draft's confidence (a small draft is often sure of a wrong "
        "token; one branch would risk the whole step): "]
    parts += listed(t, nodes, "q" if lv.depth == 0 else "score")
    if lv.cut_by_topk:
        parts += [". Top-K cut ", lv_quote(k, lv, "cut_by_topk"), " (", lv_quote(k, lv, "candidates"), " − ",
                  lv_quote(k, lv, "kept"), ")"]
    else:  # only each parent's best K were scored: Top-K chose them from the whole draft vocabulary
        parts += [". Only each parent's best K children were scored, so Top-K already chose these from the whole "
                  "draft vocabulary"]
    parts += ["; the budget has N − |T| = ", lv_quote(k, lv, "budget_left"), " nodes left."]
    name = "Root Top-K" if lv.depth == 0 else f"d = {lv.depth} Top-K"
    lead = ("TALON keeps the draft's few best first guesses, however sure the draft is." if lv.depth == 0 else
            f"At depth {lv.depth} TALON again keeps the few best children, whatever the draft believes.")
    return Stage(name, tuple(parts), hidden(lv.depth, tuple(nodes)), lead)


def gate_level(t: StepTrace, k: int, lv: LevelTrace) -> Stage:
    """TALON's gated levels: one pool, its anchor m_d, the gate μ·m_d, then the budget. Every count is the
    level record's own or derived from it (candidates − cut_by_gate passed the gate), so the sentence adds up."""
    nodes = at_depth(t, lv.depth)
    parts: list[Part] = [
        f"Level d = {lv.depth}: the children of all ", lv_quote(k, lv, "frontier"), " frontier nodes are pooled "
        "(one batched draft forward) and ", lv_quote(k, lv, "candidates"), " of them scored by p(u) = "
        "p(parent)·q (each parent's best N − |T| = ", lv_sum(k, lv, (1, "budget_left"), (1, "kept")),
        ": no more could fit the budget). The best sets the anchor m_d = ", lv_quote(k, lv, "anchor", ".3g"),
        ", so the gate is μ·m_d = ", lv_quote(k, lv, "gate", ".3g"), ". The gate cuts ",
        lv_quote(k, lv, "cut_by_gate"), " of the ", lv_quote(k, lv, "candidates")]
    cut = next((j for j, c in enumerate(t.pruned) if c.depth == lv.depth and c.reason == "gate"), None)
    if cut is not None:
        parts += [" (the best of them, ", Tok(t.pruned[cut].text), " at p(u) = ",
                  Quote(t.pruned[cut].score, f"pruned.{cut}.score"), ", falls short)"]
    parts += [", so ", passed(k, lv), " pass it"]
    over = lv.candidates - lv.cut_by_gate - lv.kept
    if over:
        parts += ["; the budget has room for ", lv_quote(k, lv, "kept"), " and cuts the other ",
                  lv_sum(k, lv, (1, "candidates"), (-1, "cut_by_gate"), (-1, "kept")), " by p(u)"]
    if lv.cut_by_budget - over > 0:
        parts += [". ", unscored(k, lv), " more children would pass the gate but were never scored, since only "
                  "each parent's best N − |T| could fit: the budget cuts ", lv_quote(k, lv, "cut_by_budget"),
                  " in all"]
    parts += ["; ", lv_quote(k, lv, "kept"), " are kept"]
    parts += [": "] + listed(t, nodes) if nodes else []
    parts += [". Budget left N − |T| = ", lv_quote(k, lv, "budget_left"), "."]
    if t.tree is not None and t.tree.mu_schedule == "adaptive":
        parts += [" μ = ", Quote(t.tree.knob("mu"), "tree.knobs.mu", ".3g"), " this step, from an adaptive schedule: ",
                  AdaptiveMu().rule, "."]
    lead = (f"At depth {lv.depth} TALON pools every child, keeps those whose path score is at least μ times the "
            "best one, and stops when the node budget is spent.")
    return Stage(f"Level d = {lv.depth}", tuple(parts), hidden(lv.depth, tuple(nodes)), lead)


def static_level(t: StepTrace, k: int, lv: LevelTrace) -> Stage:
    """A static level: K×K candidates into the pool, the Top-K go on, whatever the context."""
    nodes = at_depth(t, lv.depth)
    parts: list[Part] = [
        f"Level d = {lv.depth}: one draft forward over ", lv_quote(k, lv, "frontier"), " frontier node(s) gives ",
        lv_quote(k, lv, "candidates"), " candidates, all pooled for the final rerank; the best (p(u) = ",
        lv_quote(k, lv, "anchor", ".3g"), ") and the next best, ", lv_quote(k, lv, "kept"), " in all, form the next "
        "frontier (", lv_quote(k, lv, "cut_by_topk"), " left behind). The tree gets one level deeper, and costs one "
        "more draft forward, whatever the context; the picture shows the ones the final rerank keeps."]
    if not nodes:
        parts.append(" None of this level's candidates made the final best N, so it shows nothing here.")
    return Stage(f"Level d = {lv.depth}", tuple(parts), hidden(lv.depth, tuple(nodes)),
                 f"At depth {lv.depth} the static tree expands its best nodes by a fixed width, whatever the context.")


def chain_level(t: StepTrace, k: int, lv: LevelTrace) -> Stage:
    nodes = at_depth(t, lv.depth)
    parts: list[Part] = [f"Token {lv.depth + 1} of the chain: one draft forward"]
    if nodes:
        i = nodes[0]
        parts += [" proposes ", Tok(t.nodes[i].text), " with q = ", Quote(t.nodes[i].q, f"nodes.{i}.q"),
                  "; its path score is p(u) = ", Quote(t.nodes[i].score, f"nodes.{i}.score"), "."]
    else:
        parts.append(".")
    return Stage(f"Token {lv.depth + 1}", tuple(parts), hidden(lv.depth, tuple(nodes)),
                 f"Token {lv.depth + 1} of the chain: the drafter's own best guess after the one before.")


def tail_stage(t: StepTrace, group: list[int]) -> Stage:
    """The deep levels in one stage, with their sums."""
    a, b = group[0], group[-1] + 1
    first, last = t.levels[a].depth, t.levels[b - 1].depth
    nodes = [i for i, n in enumerate(t.nodes) if first <= n.depth <= last]
    parts: list[Part] = [f"Levels d = {first} … {last}: ", str(len(group)), " more draft forwards keep ",
                         Quote(sum(t.levels[k].kept for k in group), f"levels.{a}:{b}.kept", "d"), " nodes in all"]
    if policy(t) == "talon":
        parts += [" of ", Quote(sum(t.levels[k].candidates for k in group), f"levels.{a}:{b}.candidates", "d"),
                  " scored; the gate cuts ", Quote(sum(t.levels[k].cut_by_gate for k in group),
                                                   f"levels.{a}:{b}.cut_by_gate", "d"),
                  ", the budget ", Quote(sum(t.levels[k].cut_by_budget for k in group),
                                         f"levels.{a}:{b}.cut_by_budget", "d"),
                  " (children never scored, as no more could fit, included)"]
    parts += [". A confident context makes a narrow, deep tree."]
    return Stage(f"Levels d = {first}…{last}", tuple(parts), hidden(last, tuple(nodes)),
                 "The deepest levels, summed up: each costs one more draft forward.")


def depth_stage(t: StepTrace, depth: int) -> Stage:
    """A depth of a tree recorded without its levels: what was drafted there (the last stage holds the rest)."""
    last = depth == MAX_LEVEL_STAGES - 1
    nodes = [i for i, n in enumerate(t.nodes) if n.depth == depth or last and n.depth > depth]
    name = f"Token {depth + 1}" if policy(t) == "chain" else f"Depth d = {depth}" + ("…" if last else "")
    parts: list[Part] = [f"{name}: ", str(len(nodes)), " node(s) drafted: ", *listed(t, nodes, "q"), "."]
    return Stage(name, tuple(parts), hidden(deepest(t) if last else depth, tuple(nodes)),
                 f"What was drafted at {name.lower()} (this record keeps no per-level detail).")
