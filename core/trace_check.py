"""Reading a step record back from JSON we did not write ourselves (an imported trace): every field is
checked against its declared type, every count against what the engine could have produced, and the tree
against its own invariants, before anything renders or allocates from it.

Why field by field: the renderers format numbers with format specs and walk parent pointers; a string where
an int belongs, a parent that points forward or a depth of 10^6 would otherwise reach a figure (or the
visitor's browser) as markup, a crash or a frozen tab. A problem is one TraceFormatError naming the field."""
from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import MISSING, dataclass, fields, is_dataclass

from core.knobs import MAX_N

MAX_INT = 2**31 - 1  # token ids, counts and indices the engine writes all fit an int32
IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")  # stop reasons, policy and drafter names, head kinds
IDENT_FIELDS = {"StepTrace.draft_stop", "StepTrace.stop_reason", "StepTrace.drafter", "StepTrace.method",
                "PrunedCandidate.reason", "SpecBoundStep.heads", "TreeStep.policy", "TreeStep.mu_schedule"}
NAN_OK = {"ExitTrace.raw_conf"}  # SpecBound skips the raw softmax when nothing will show it (NaN)
STATUSES = ("accepted", "rejected", "unreached")
LEGACY_TREE_KNOBS = ("N", "K", "mu", "k_init", "depth", "gamma", "shape_temperature")
ROOT = -1  # parent of depth-0 nodes: the last committed token


class TraceFormatError(ValueError):
    """An exported step that does not read back; the message names the field."""


@dataclass(frozen=True)
class TraceLimits:
    """The most any step the engine writes can hold: a node budget, a model's depth, a context."""
    max_nodes: int = MAX_N  # drafted nodes per step (N's range; SpecBound's w_max is bounded by the context)
    max_layers: int = 256  # layers of the deepest supported model, with room
    max_steps: int = 8192  # steps per run: at least one token each, so at most the context
    max_text: int = 1024  # characters of one token's text or one reason line
    max_pruned: int = 4 * MAX_N  # cut candidates kept per step for the faint overlay
    max_records: int = 200_000  # nodes + pruned + levels + exits over the whole file: bounds memory


def check_value(tp, value, what: str, limits: TraceLimits, name: str):
    """`value` as the annotated type `tp`, or a TraceFormatError naming `what`; `name` is the field's
    'Record.field', for the rules that belong to one field."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return check_value(inner[0], value, what, limits, name)
    if origin is list:
        if not isinstance(value, list):
            raise TraceFormatError(f"{what} is not a list")
        bound = limits.max_pruned if name == "StepTrace.pruned" else limits.max_nodes + limits.max_layers + 1
        if len(value) > bound:
            raise TraceFormatError(f"{what} has {len(value)} entries; a step holds at most {bound}")
        return [check_value(args[0], x, f"{what}[{j}]", limits, name) for j, x in enumerate(value)]
    if origin is dict:  # a record's knobs: plain names to numbers
        if not isinstance(value, dict) or len(value) > 64:
            raise TraceFormatError(f"{what} is not an object of at most 64 entries")
        bad = [k for k in value if not isinstance(k, str) or not IDENT.match(k)]
        if bad:
            raise TraceFormatError(f"{what} has a key that is not a plain name")
        return {k: check_value(args[1], v, f"{what}.{k}", limits, name) for k, v in value.items()}
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise TraceFormatError(f"{what} is not a pair")
        return tuple(check_value(a, x, what, limits, name) for a, x in zip(args, value))
    if is_dataclass(tp):
        return record(tp, value, what, limits)
    return check_scalar(tp, value, what, limits, name)


def check_scalar(tp, value, what: str, limits: TraceLimits, name: str):
    if tp is bool:
        if not isinstance(value, bool):
            raise TraceFormatError(f"{what} is not true/false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value <= MAX_INT:
            raise TraceFormatError(f"{what} is not a whole number in -1..{MAX_INT}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TraceFormatError(f"{what} is not a number")
        if not math.isfinite(value) and not (name in NAN_OK and value != value):
            raise TraceFormatError(f"{what} is not a finite number")
        return value  # an int stays an int: it reads back as it was written
    if tp is str:
        if not isinstance(value, str) or len(value) > limits.max_text:
            raise TraceFormatError(f"{what} is not a text of at most {limits.max_text} characters")
        if name in IDENT_FIELDS and value and not IDENT.match(value):
            raise TraceFormatError(f"{what} is not a plain name")
        return value
    raise TraceFormatError(f"{what} has a type this reader does not know")  # pragma: no cover


def record(kind, d, what: str, limits: TraceLimits):
    """A trace dataclass from its dict: every known field checked, unknown keys ignored (older exports
    carry a few), a missing field named."""
    if not isinstance(d, dict):
        raise TraceFormatError(f"{what} is not an object")
    if kind.__name__ == "TreeStep" and "knobs" not in d:  # exports from before the knobs were kept as data
        d = {**d, "knobs": {k: d[k] for k in LEGACY_TREE_KNOBS if isinstance(d.get(k), (int, float))}}
    hints = typing.get_type_hints(kind)
    values = {}
    for f in fields(kind):
        if f.name not in d:
            if f.default is MISSING and f.default_factory is MISSING:
                raise TraceFormatError(f"{what} lacks {f.name}")
            continue
        values[f.name] = check_value(hints[f.name], d[f.name], f"{what}'s {f.name}", limits,
                                     f"{kind.__name__}.{f.name}")
    return kind(**values)


def check_tree(step, what: str, limits: TraceLimits) -> None:
    """The invariants the renderers walk on: parents precede children, depth = parent's depth + 1, the
    accepted path is a path from the root, and every index points inside the step."""
    n = len(step.nodes)
    if n > limits.max_nodes:
        raise TraceFormatError(f"{what} has {n} drafted nodes; a step drafts at most {limits.max_nodes}")
    for i, node in enumerate(step.nodes):
        if node.parent != ROOT and not 0 <= node.parent < i:
            raise TraceFormatError(f"{what}'s nodes[{i}].parent must be -1 or an earlier node")
        if node.depth != (0 if node.parent == ROOT else step.nodes[node.parent].depth + 1):
            raise TraceFormatError(f"{what}'s nodes[{i}].depth is not its parent's depth + 1")
        if node.status not in STATUSES:
            raise TraceFormatError(f"{what}'s nodes[{i}].status must be one of {', '.join(STATUSES)}")
    parent = ROOT
    for j, i in enumerate(step.accepted_path):
        if not 0 <= i < n or step.nodes[i].parent != parent:
            raise TraceFormatError(f"{what}'s accepted_path[{j}] does not continue a path from the root")
        parent = i
    deepest = max((node.depth for node in step.nodes), default=0)
    for name, items, attr in (("choices", step.choices, "at"), ("pruned", step.pruned, "parent")):
        for j, x in enumerate(items):
            if not ROOT <= getattr(x, attr) < max(n, 1):
                raise TraceFormatError(f"{what}'s {name}[{j}].{attr} points outside the step")
    for j, c in enumerate(step.pruned):
        if not 0 <= c.depth <= deepest + 1:
            raise TraceFormatError(f"{what}'s pruned[{j}].depth lies outside the tree")
    # a level is a drafting forward: the static tree grows D + 1 levels of candidates and then keeps only N of
    # them, so its levels are bounded by its forwards (δ), not by the nodes it kept
    if len(step.levels) > max(n, step.delta) + 1 or len(step.choices) > n + 1 or len(step.committed_ids) > n + 1:
        raise TraceFormatError(f"{what} records more levels, choices or committed tokens than it drafted")
    check_exits(step, what, limits)


def check_exits(step, what: str, limits: TraceLimits) -> None:
    """SpecBound: layers within the model, one confidence per checked layer, each in [0, 1]."""
    sb = step.specbound
    if sb is not None and not 1 <= sb.num_layers <= limits.max_layers:
        raise TraceFormatError(f"{what}'s specbound.num_layers must be in 1..{limits.max_layers}")
    top = sb.num_layers if sb is not None else limits.max_layers
    if sb is not None and any(not 1 <= layer <= top for layer in sb.exit_layers):
        raise TraceFormatError(f"{what}'s specbound.exit_layers must lie in 1..{top}")
    if len(step.exits) > len(step.nodes) + 1:
        raise TraceFormatError(f"{what} has more exit records than drafted tokens")
    for j, e in enumerate(step.exits):
        per_layer = (e.raw_conf, e.annealed_conf, e.temperature, e.top_ids, e.top_texts)
        if len(e.layers) > top or any(len(v) != len(e.layers) for v in per_layer):
            raise TraceFormatError(f"{what}'s exits[{j}] needs one value per checked layer (at most {top})")
        if any(not 1 <= layer <= top for layer in e.layers) or not 0 <= e.node <= len(step.nodes):
            raise TraceFormatError(f"{what}'s exits[{j}] names a layer or node outside the step")
        if any(not 0 <= c <= 1 for c in e.annealed_conf) or any(not (c != c or 0 <= c <= 1) for c in e.raw_conf):
            raise TraceFormatError(f"{what}'s exits[{j}] has a confidence outside [0, 1]")
        check_unchecked(e, f"{what}'s exits[{j}]", top)


def check_unchecked(e, what: str, top: int) -> None:
    """The shown-only confidences at layers without a check: one value per layer, each layer once, within
    the model and apart from the checked ones, each confidence in [0, 1]."""
    shown = (e.unchecked_raw, e.unchecked_annealed, e.unchecked_top_texts)
    if len(e.unchecked_layers) > top or any(len(v) != len(e.unchecked_layers) for v in shown):
        raise TraceFormatError(f"{what} needs one unchecked value per unchecked layer (at most {top})")
    layers = set(e.unchecked_layers)
    if len(layers) != len(e.unchecked_layers) or layers & set(e.layers) or any(not 1 <= x <= top for x in layers):
        raise TraceFormatError(f"{what}'s unchecked_layers must be distinct layers in 1..{top} without a check")
    if any(not 0 <= c <= 1 for c in e.unchecked_raw + e.unchecked_annealed):
        raise TraceFormatError(f"{what} has an unchecked confidence outside [0, 1]")


def size(step) -> int:
    """The records a step holds, for the whole file's memory bound."""
    return len(step.nodes) + len(step.pruned) + len(step.levels) + len(step.exits)
