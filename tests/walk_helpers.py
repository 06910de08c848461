"""What the walk tests share: reading a quoted number's field path (viz/walk.py) in an exported step, and
checking a number as the page shows it against that field."""
from __future__ import annotations

import math


def resolve(step: dict, shadow: dict | None, path: str):
    """The value a walk's field path names: 'levels.1.anchor', 'nodes#' (a length), 'levels.9:12.kept' (a sum
    over a slice), 'shadow.tau' (the static tree from the same prefix), or paths joined by ' + ' / ' − ' (a count
    derived from several fields)."""
    terms = path.split(" ")
    if len(terms) > 1:
        total, sign = 0, 1
        for term in terms:
            if term in ("+", "−"):
                sign = 1 if term == "+" else -1
            else:
                total += sign * resolve(step, shadow, term)
        return total
    if path.startswith("shadow."):
        return resolve(shadow, None, path[len("shadow."):])
    return walk(step, path.split("."))


def walk(value, keys: list[str]):
    if not keys or value is None:  # a knob the record does not carry reads as none, as the page shows it
        return value
    key, rest = keys[0], keys[1:]
    if key.endswith("#"):
        return len(value[key[:-1]])
    if ":" in key:
        a, b = (int(x) for x in key.split(":"))
        return sum(walk(item, rest) for item in value[a:b])
    if isinstance(value, list):
        return walk(value[int(key)], rest)
    return walk(value.get(key), rest)


def shown_matches(shown: str, value, spec: str) -> bool:
    """The page's text for a number equals the trace value in the quote's format ('—' for none)."""
    if value is None:
        return shown == "—"
    if isinstance(value, float) and math.isnan(value):
        return shown == "nan"
    return shown == format(value, spec)


def random_talon_trace(seed: int):
    """A real TALON policy (core/trees/policies.py) grown on random draft distributions, as the engine records
    it: some rows peaked, some flat, so gates, budgets and never-scored children all happen. The target's
    verdicts are made up (the walk's growth stages do not read them)."""
    import random

    import torch

    from core.trace import ROOT, DraftNode, StepTrace, TargetChoice, TreeStep
    from core.trees.policies import TalonPolicy

    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    knobs = dict(N=rng.choice([4, 8, 16, 32, 60, 96]), K=rng.choice([2, 3, 5, 10]),
                 mu=rng.choice([0.001, 0.005, 0.03, 0.1, 0.3]), k_init=rng.choice([0, 1, 1, 2]))

    def expand(frontier, tree):
        sharp = torch.tensor([rng.choice([0.3, 1.0, 4.0, 8.0]) for _ in frontier])[:, None]
        return torch.softmax(torch.randn(len(frontier), 64, generator=gen) * sharp, dim=-1)  # (F, V)

    res = TalonPolicy(**knobs).grow(expand, max_depth=rng.choice([3, 8, 12]))
    tree = res.tree
    path, at = [], ROOT
    for _ in range(rng.randint(0, 3)):
        kids = [i for i, p in enumerate(tree.parents) if p == at]
        if not kids:
            break
        at = kids[0]
        path.append(at)
    nodes = [DraftNode(t, f"t{t}", p, d, q, s, 0.5, "accepted" if i in path else "unreached")
             for i, (t, p, d, q, s) in enumerate(zip(tree.tokens, tree.parents, tree.depths, tree.q, tree.scores))]
    for c in res.pruned:
        c.text = f"t{c.token_id}"
    return StepTrace(0, "talon", 10, nodes, path, [TargetChoice(at, 1, "x", 0.5)], [1], ["x"], tau=len(path) + 1,
                     delta=res.forwards, target_forwards=1, levels=res.levels, pruned=res.pruned, draft_stop=res.stop,
                     tree=TreeStep("talon", {**knobs, "shape_temperature": 1.0}))
