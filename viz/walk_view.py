"""One walk stage drawn: its sentence as HTML (every quoted number in a span naming the trace field it comes
from) and its picture, by the same renderers the views use (the tree with a Reveal, SpecBound's heatmap up to a
token, the exit bars). Everything that reaches HTML goes through viz/escape.py (esc), and everything that reaches a
Plotly picture through its plot_text."""
from __future__ import annotations

import re

import plotly.graph_objects as go

from core.trace import StepTrace
from viz.escape import esc, num, plot_text
from viz.exits_fig import confidence_heatmap, exit_bars
from viz.titles import wrap_title
from viz.tree_fig import natural_height, tree_figure, visible
from viz.walk import stages
from viz.walk_parts import ExitPicture, Part, Quote, Stage, Tok


def part_html(p: Part) -> str:
    if isinstance(p, Quote):
        return (f'<span class="ss-walk-num" data-field="{esc(p.field)}" data-spec="{esc(p.spec)}" '
                f'title="from this step\'s trace: {esc(p.field)}">{num(p.value, p.spec)}</span>')
    if isinstance(p, Tok):
        return f'<code class="ss-walk-tok">{esc(visible(p.text))}</code>'
    return esc(p)


SENTENCE_END = re.compile(r"[.!?](\s|$)")


def first_sentence(parts: tuple[Part, ...]) -> tuple[list[Part], list[Part]]:
    """The parts up to the end of their first sentence, and the rest (empty when it is one sentence): what
    happened in this step, in its own numbers, is what a visitor pressing Next reads first."""
    for i, p in enumerate(parts):
        if isinstance(p, str):
            end = SENTENCE_END.search(p)
            if end:
                rest = [p[end.end():], *parts[i + 1:]]
                return [*parts[:i], p[:end.end()].rstrip()], [r for r in rest if r != ""]
    return list(parts), []


def stage_html(all_stages: list[Stage], at: int, heading: str) -> str:
    """The stage's heading; what happened in this step, in its numbers (the first sentence of its details);
    the stage's plain lead; the rest of the details folded; the list of stages with this one marked."""
    stage = all_stages[at]
    said, rest = first_sentence(stage.parts)
    items = "".join(f'<li class="{"ss-on" if i == at else ""}">{esc(s.name)}</li>' for i, s in enumerate(all_stages))
    more = (f'<details class="ss-walk-more"><summary>More, in this step\'s numbers</summary>'
            f'<p class="ss-walk-detail">{"".join(part_html(p) for p in rest)}</p></details>' if rest else "")
    return (f'<div class="ss-walk-head">{esc(heading)} · stage <b class="ss-walk-at">{at + 1}</b> of '
            f'<b class="ss-walk-of">{len(all_stages)}</b>: <b class="ss-walk-name">{esc(stage.name)}</b></div>'
            f'<p class="ss-walk-say" role="status" aria-live="polite">{"".join(part_html(p) for p in said)}</p>'
            f'<p class="ss-walk-lead">{esc(stage.lead)}</p>{more}'
            f'<ol class="ss-walk-stages">{items}</ol>')


def stage_figure(trace: StepTrace, shadow: StepTrace | None, stage: Stage, title: str, show_pruned: bool = True,
                 annealed: bool = True) -> go.Figure:
    """The stage's picture; trees keep one height through the walk, so levels stay where they were."""
    pic = stage.picture
    if isinstance(pic, ExitPicture):
        if pic.kind in ("bars", "verify"):
            fig = exit_bars(trace, height=380, verify=pic.kind == "verify", compare=pic.compare)
        else:
            fig = confidence_heatmap(trace, annealed, height=440, upto=pic.upto, focus=pic.focus)
        shown = "annealed" if annealed else "raw"
        fig.layout.title.text = (wrap_title(title) if pic.kind != "heatmap" else
                                 wrap_title(f"{title} · {shown} confidence, faint: no check"))
        return fig
    source = shadow if pic.shadow and shadow is not None else trace
    height = max(natural_height(trace), natural_height(shadow))
    return tree_figure(source, show_pruned, title, height, pic.reveal)


def walk_view(trace: StepTrace, shadow: StepTrace | None, at: int, heading: str, show_pruned: bool = True,
              annealed: bool = True) -> tuple[str, go.Figure, int]:
    """Stage `at` (clamped) of the step: (sentence HTML, picture, the stage shown)."""
    all_stages = stages(trace, shadow)
    at = max(0, min(at, len(all_stages) - 1))
    title = f"{heading} · {all_stages[at].name}"
    return (stage_html(all_stages, at, heading),
            stage_figure(trace, shadow, all_stages[at], plot_text(title), show_pruned, annealed), at)
