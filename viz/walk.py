""""Walk me through this step": one step's stages as plain data, each a sentence quoting this step's own numbers
and a picture showing only what that stage has done (viz/walk_view.py draws them; viz/walk_specbound.py holds
SpecBound's stages).

Why plain data built from the StepTrace alone: the walk works the same on a live, replayed or imported step,
calls no model, and every number it quotes names the trace field it comes from (`Quote.field`), so the page can
show where a number comes from and a test can check each one against the exported trace.

Field paths: dot-separated keys and indices into the step's `to_dict()` ('levels.1.anchor', 'choices.-1.p');
'nodes#' is a list's length; 'levels.9:12.kept' sums over a slice; 'shadow.' reads the static tree drafted
from the same prefix (the run's stored shadow, exported as static_shadows)."""
from __future__ import annotations

from core.trace import StepTrace
from viz.walk_parts import ExitPicture, Part, Quote, Stage, Tok, TreePicture  # noqa: F401 (the walk's data)
from viz.walk_parts import deepest
from viz.walk_tree import MAX_LEVEL_STAGES, depth_stage, level_groups, level_stage, start_stage
from viz.walk_verdict import bonus_stage, grown_stage, static_stage, verify_stage, walk_stage


def stages(trace: StepTrace, shadow: StepTrace | None = None) -> list[Stage]:
    """Every stage of one step, in order: SpecBound's per drafted token, the tree methods' per level."""
    if trace.specbound is not None or trace.exits:
        from viz.walk_specbound import specbound_stages
        return specbound_stages(trace)
    return tree_stages(trace, shadow)


def tree_stages(t: StepTrace, shadow: StepTrace | None) -> list[Stage]:
    """Chain, static and TALON: the root, each level grown, the budget spent, the one verification pass, the
    walk down the accepted path, the bonus token and (TALON) the static tree's verdict from the same prefix."""
    out = [start_stage(t)]
    if t.levels:
        out += [level_stage(t, group) for group in level_groups(t.levels)]
    else:  # a record without its levels (an older export): the drafted depths, one stage each
        out += [depth_stage(t, d) for d in range(min(deepest(t) + 1, MAX_LEVEL_STAGES))]
    out += [grown_stage(t), verify_stage(t), walk_stage(t), bonus_stage(t, shadow)]
    if shadow is not None and t.method != "static":
        out.append(static_stage(t, shadow))
    return out


