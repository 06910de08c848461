"""The walk's plain data (viz/walk.py): a stage is a sentence of text, tokens and quoted numbers, and a picture
that says how much of the step to draw; with the small helpers every stage builder shares."""
from __future__ import annotations

from dataclasses import dataclass

from core.trace import StepTrace
from viz.tree_fig import Reveal

MAX_LISTED = 4  # tokens named per sentence; the picture shows them all


@dataclass(frozen=True)
class Quote:
    """A number quoted from the trace, as shown (`spec`), with the field it comes from: a path, or paths joined
    by ' + ' and ' − ' for a count derived from several fields (what passed a gate: candidates − cut_by_gate)."""
    value: object
    field: str
    spec: str = ".3g"


def combined(terms: list[tuple[int, str, object]], spec: str = "d") -> Quote:
    """Σ sign·value over `terms` [(+1 | −1, field path, value)], named by the same expression of paths, so the
    page shows, and a test recomputes, where a derived count comes from."""
    field = " ".join((f"{'+' if sign > 0 else '−'} " if k or sign < 0 else "") + path
                     for k, (sign, path, _) in enumerate(terms))
    return Quote(sum(sign * value for sign, _, value in terms), field, spec)


@dataclass(frozen=True)
class Tok:
    """A token's text, shown with its whitespace visible."""
    text: str


Part = str | Quote | Tok


@dataclass(frozen=True)
class TreePicture:
    reveal: Reveal
    shadow: bool = False  # the static tree from the same prefix instead of the step's own


@dataclass(frozen=True)
class ExitPicture:
    kind: str  # heatmap (the step's tokens up to `upto`) | bars (exit depths with the target's verdicts) |
    # verify (the bars with the layers the verification pass computed above each exit)
    upto: int = 0
    focus: int | None = None  # the exit record a stage is about
    compare: int | None = None  # the drafted token whose q the target's p is drawn against (the rejection)


@dataclass(frozen=True)
class Stage:
    name: str  # a short heading: "Root Top-K", "Level d = 2", "Verification"
    parts: tuple[Part, ...]  # what happened, in this step's own numbers: the first sentence shows, the rest folds
    picture: TreePicture | ExitPicture
    lead: str = ""  # one plain sentence under it: what this stage does in any step, without the numbers


def policy(t: StepTrace) -> str:
    return t.tree.policy if t.tree is not None else t.method


def hidden(depth: int, focus: tuple[int, ...] = ()) -> TreePicture:
    """The tree down to `depth`, before the target has judged anything."""
    return TreePicture(Reveal(depth, verdicts=False, bonus=False, focus=focus))


def at_depth(t: StepTrace, depth: int) -> list[int]:
    return [i for i, n in enumerate(t.nodes) if n.depth == depth]


def deepest(t: StepTrace) -> int:
    return max((n.depth for n in t.nodes), default=-1)


def listed(t: StepTrace, nodes: list[int], what: str = "score") -> list[Part]:
    """"'a' (p(u) = 0.6), 'b' (p(u) = 0.3) and 3 more": the best few of `nodes` with their q or p(u)."""
    label = "q" if what == "q" else "p(u)"
    best = sorted(nodes, key=lambda i: -t.nodes[i].score)
    parts: list[Part] = []
    for k, i in enumerate(best[:MAX_LISTED]):
        parts += [", " if k else "", Tok(t.nodes[i].text), f" ({label} = ",
                  Quote(getattr(t.nodes[i], what), f"nodes.{i}.{what}"), ")"]
    if len(best) > MAX_LISTED:
        parts.append(f" and {len(best) - MAX_LISTED} more")
    return parts


