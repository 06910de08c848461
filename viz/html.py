"""Small HTML panels: the generated text coloured by step and origin, the stats panel, the budget meter
and the per-depth gate table. Every interpolated value, text or number, goes through viz/escape.py."""
from __future__ import annotations

from dataclasses import dataclass

from core.eagle3.readout import CompatReadout
from core.metrics import MIN_RESAMPLED, RunStats
from core.trace import StepTrace
from viz.escape import esc, num
from viz.exits_fig import why_stopped
from viz.palette import STATUS_COLORS, step_hue


def token_origins(trace: StepTrace) -> list[str]:
    """Per committed token: 'draft' (an accepted drafted token) or 'bonus' (the target's own token)."""
    return ["draft" if i < len(trace.accepted_path) else "bonus" for i in range(len(trace.committed_ids))]


def text_html(prompt: str | list[tuple[str, bool]], traces: list[StepTrace], upto: int | None = None,
              reveal: int | None = None) -> str:
    """The prompt in grey (what a chat template added, fainter and in italics), then each step's tokens on a
    background hue that changes per step; accepted drafted tokens are plain, bonus tokens are underlined in
    the bonus colour. `reveal`: show only the first `reveal` tokens of the last shown step (Play streams a
    step's tokens one at a time)."""
    shown = traces if upto is None else traces[: upto + 1]
    prompt_parts = [(prompt, False)] if isinstance(prompt, str) else prompt
    parts = [prompt_html(prompt_parts)]
    for i, t in enumerate(shown):
        pairs = list(zip(t.committed_texts, token_origins(t)))
        if reveal is not None and i == len(shown) - 1:
            pairs = pairs[:reveal]
        for text, origin in pairs:
            style = f"background:{step_hue(t.index if isinstance(t.index, int) else 0)}"
            if origin == "bonus":
                style += f";border-bottom:3px solid {STATUS_COLORS['bonus_text']}"
            title = f"step {num(t.index + 1, 'd')} · {'accepted draft' if origin == 'draft' else 'bonus token from the target'}"
            parts.append(f'<span class="ss-tok ss-{origin}" style="{style}" title="{title}">{esc(text)}</span>')
    legend = (f'<div class="ss-legend">background = step · <span style="border-bottom:3px solid '
              f'{STATUS_COLORS["bonus_text"]}">underlined</span> = bonus token from the target · plain = accepted '
              f'draft token</div>')
    return f'<div class="ss-text">{"".join(parts)}</div>{legend}'


TIPS = {  # what each number is, where it stands (the page's tooltips)
    "steps": "steps so far: one draft phase and one verification forward of the target each",
    "tokens": "tokens committed so far (accepted drafts plus one bonus token per step)",
    "MAT": "mean accepted tokens: the mean of τ, the tokens one step commits (≥ 1; higher is better)",
    "δ": "draft forwards per step (SpecBound: layers run while drafting, and exit checks, over L: a fraction)",
    "tok/s": "committed tokens over this run's summed Step time, the prompt's prefill taken out",
    "c": "one draft forward's cost over one target forward's (measured in this run and the AR run)",
    "R": "the papers' model τ/(1 + cδ): it assumes a verification costs one target forward whatever its size",
    "R_curve": "the same model with this machine's measured cost of verifying this many tokens and drafting these "
               "frontiers (Tune's cost curve): what R would be here; SpecBound: the layers its steps ran, its checks "
               "and the final LM head, each measured in layers (its verification resumes mid-model: not a whole forward)",
    "speedup": "measured: plain AR decoding's time over this run's for the same output positions",
    "Σp(u)": "the drafter's own estimate of how many drafted tokens the target accepts (sum of path scores)",
    "m_d": "the anchor: the best path score p(u) among the pooled candidates at this depth",
    "μ·m_d": "TALON's gate: candidates with p(u) ≥ μ·m_d survive",
    "kept": "candidates kept at this depth out of those scored",
}
PROMPT_SHOWN = 400  # characters of a long prompt shown in full before the generated text; the rest folds


def prompt_html(parts: list[tuple[str, bool]]) -> str:
    """The prompt in grey (what a chat template added, fainter and in italics). A long prompt folds all but
    its last PROMPT_SHOWN characters behind a 'show' toggle, so the new tokens stay in view."""
    def span(text: str, template: bool) -> str:
        if template:
            return f'<span class="ss-prompt ss-template" title="added by the chat template">{esc(text)}</span>'
        return f'<span class="ss-prompt">{esc(text)}</span>'
    total = sum(len(t) for t, _ in parts)
    if total <= PROMPT_SHOWN:
        return "".join(span(t, tmpl) for t, tmpl in parts)
    head, tail, left = [], [], total - PROMPT_SHOWN
    for text, template in parts:  # split the parts at the fold, keeping which are the template's
        cut = min(len(text), max(0, left))
        left -= cut
        head.append((text[:cut], template))
        tail.append((text[cut:], template))
    hidden = "".join(span(t, tmpl) for t, tmpl in head if t)
    return (f'<details class="ss-fold"><summary>… {total - PROMPT_SHOWN:,} earlier characters of the prompt</summary>'
            f'{hidden}</details>' + "".join(span(t, tmpl) for t, tmpl in tail if t))


KINDS = {"counted": "counted", "measured": "measured", "modelled": "modelled"}  # which kind each number is
KINDS_NOTE = ("Three speed numbers, two kinds: <b>measured</b> ones were timed on this machine (the speed-up over "
              "AR is the one to quote); <b>modelled</b> ones are computed from τ, δ and c, the papers' R assuming "
              "a verification costs one target forward whatever its size, the other with this machine's measured "
              "cost of verifying that many tokens.")
NOISE_NOTE = ("Timings come from this machine, which may be shared with other visitors and programs: they are "
              "noisy, so read the speed-up with its range and re-measure when in doubt.")


def speedup_text(s: RunStats) -> str:
    """'1.23× (1.10–1.35)': the measured speed-up over AR with its 10th–90th percentile range."""
    sp = s.spread
    if sp is None:
        return "—"
    if sp.lo is None:
        return num(sp.value, ".2f", "×")
    return f"{num(sp.value, '.2f', '×')} <small>({num(sp.lo)}–{num(sp.hi)})</small>"


def stats_html(s: RunStats) -> str:
    if s.lossless is None:
        check = f'<span class="ss-na">lossless check: {esc(s.lossless_note)}</span>'
    elif s.lossless:
        check = f'<span class="ss-ok">lossless check ✓</span> <small>{esc(s.lossless_note)}</small>'  # the note says what
    else:
        check = f'<span class="ss-bad">lossless check: ✗ {esc(s.lossless_note)}</span>'
    rows = [("steps", num(s.steps, "d"), TIPS["steps"], "counted"),
            ("tokens", num(s.tokens, "d"), TIPS["tokens"], "counted"),
            ("MAT (mean τ)", num(s.mat), TIPS["MAT"], "counted"), ("mean δ", num(s.mean_delta), TIPS["δ"], "counted"),
            ("tokens/s", num(s.tok_s, ".1f"), TIPS["tok/s"], "measured"),
            ("c = T_q/T_p", num(s.c, ".3f"), TIPS["c"], "measured"),
            ("R = τ/(1+cδ), the papers' model", num(s.R, ".2f", "×"), TIPS["R"], "modelled"),
            ("R with this machine's measured costs", num(s.R_curve, ".2f", "×"), TIPS["R_curve"], "modelled"),
            ("speed-up over AR, timed here", speedup_text(s), TIPS["speedup"], "measured")]
    cells = "".join(f'<div class="ss-stat ss-{kind}" title="{esc(tip)}"><div class="ss-k">'
                    f'<span class="ss-kind">{KINDS[kind]}</span> {k}</div><div class="ss-v">{v}</div></div>'
                    for k, v, tip, kind in rows)
    sp = s.spread
    if not s.timed_here:
        how = "Speed-up: not measured here — an imported trace was timed where it was exported."
    elif sp is None:
        how = "Speed-up: waiting for plain AR decoding of this prompt to be timed (it runs after each step)."
    else:
        spread = (f" No range yet: it needs at least {MIN_RESAMPLED} timed steps to resample." if sp.lo is None
                  else " The range is the 10th–90th percentile over the run's steps resampled with replacement.")
        how = (f"Speed-up: plain AR decoding's time over this run's time for the same {num(sp.positions, 'd')} output "
               f"positions of this prompt, both timed around each engine step with the prompt's prefill taken "
               f"out.{spread} {esc(s.base_note)}.")
    notes = (f"<small>tokens/s: committed tokens over the summed wall time of this run's Step calls, the prompt's "
             f"prefill taken out. {how} {esc(s.c_note)}.</small>")
    return (f'<div class="ss-stats">{cells}</div><div class="ss-note ss-kinds">{KINDS_NOTE}</div>'
            f'<div>{check}</div><div>{notes}</div>'
            f'<div class="ss-note ss-noise">{NOISE_NOTE}</div>')


def budget_html(trace: StepTrace | None) -> str:
    """Nodes used of the budget: N for trees, γ for chains, w_max for SpecBound."""
    if trace is None:
        return '<div class="ss-budget">budget: no step yet</div>'
    cap, label = trace.budget()
    used = len(trace.nodes)
    if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
        return f'<div class="ss-budget">{used} nodes drafted</div>'
    frac = min(1.0, used / cap)
    name = "N (chosen by auto)" if label == "auto" else label
    return (f'<div class="ss-budget"><div class="ss-meter"><div style="width:{frac:.0%}"></div></div>'
            f"budget: {used} of {esc(name)} = {num(cap, 'd')} nodes used · δ = {num(trace.delta, '.3g')} draft "
            f"forwards · τ = {num(trace.tau, 'd')} committed{score_text(trace)}</div>{tree_words(trace)}"
            f"{drafter_html(trace)}{auto_html(trace)}")


def tree_words(trace: StepTrace) -> str:
    """The tree in one sentence: the picture's text alternative (what a screen reader, or a glance, needs)."""
    if trace.tree is None or not trace.nodes:
        return ""
    depth = max(n.depth for n in trace.nodes)
    took = [n.text for n in (trace.nodes[i] for i in trace.accepted_path)]
    lost = [n for n in trace.nodes if n.status == "rejected"]
    bonus = trace.choices[-1].text if trace.choices else None
    said = (f"In words: {len(trace.nodes)} drafted nodes over depths d = 0–{depth}; the target accepted "
            f"{len(took)}" + (f" ({' '.join(repr(t) for t in took)})" if took else "") +
            (f", rejected {len(lost)} it judged" if lost else "") +
            (f", then added its own token {bonus!r}" if bonus is not None else "") + ".")
    return f'<div class="ss-note ss-words">{esc(said)}</div>'



def score_text(trace: StepTrace) -> str:
    """Σp(u) beside τ: the drafter's own estimate of how many drafted tokens the target would accept."""
    if trace.score_sum is None:
        return ""
    return f' · <span title="{esc(TIPS["Σp(u)"])}">Σp(u) = {num(trace.score_sum)}</span> vs {trace.accepted} accepted'


def drafter_html(trace: StepTrace) -> str:
    if not trace.drafter:
        return ""
    return f'<div class="ss-note">drafter: <b>{esc(trace.drafter)}</b> proposed this tree</div>'


def auto_html(trace: StepTrace) -> str:
    """Under `auto`: the N chosen for this step and why (also in the step's JSON trace)."""
    a = trace.auto
    if a is None:
        return ""
    T = "" if a.T_shape is None else f", T_shape = {num(a.T_shape, 'g')}"
    return f'<div class="ss-note">auto chose N = {num(a.N, "d")}{T} for this step: {esc(a.reason)}</div>'


@dataclass(frozen=True)
class LevelRow:
    """One level's counts as the table shows them, split so that they add up: kept + cut by the gate + cut by
    the budget among the scored + cut by Top-K = scored; `unscored` counts the children ranked below each parent's
    best N − |T| that would have passed the gate too (the budget cut them unscored); `in_tree` the nodes of this
    depth in the tree verified (a static tree's final rerank decides those)."""
    depth: int
    frontier: int
    scored: int
    anchor: float | None
    gate: float | None
    kept: int
    cut_gate: int
    cut_budget: int
    cut_topk: int
    unscored: int
    in_tree: int
    budget_left: int


def level_rows(trace: StepTrace) -> list[LevelRow]:
    rows = []
    for lv in trace.levels:
        budget = max(0, lv.candidates - lv.kept - lv.cut_by_gate - lv.cut_by_topk)
        rows.append(LevelRow(lv.depth, lv.frontier, lv.candidates, lv.anchor, lv.gate, lv.kept, lv.cut_by_gate, budget,
                             lv.cut_by_topk, max(0, lv.cut_by_budget - budget),
                             sum(n.depth == lv.depth for n in trace.nodes), lv.budget_left))
    return rows


def table_html(columns: tuple[tuple[str, str], ...], rows: list[tuple]) -> str:
    head = "<tr>" + "".join(f'<th title="{esc(tip)}">{esc(name)}</th>' for name, tip in columns) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{num(v, spec)}</td>" for v, spec in row) + "</tr>" for row in rows)
    return f'<div class="ss-tablewrap"><table class="ss-levels">{head}{body}</table></div>'


def levels_html(trace: StepTrace | None) -> str:
    """Per depth: frontier, candidates, anchor m_d, gate μ·m_d, what was kept and what each rule cut, in counts
    that add up on every row (a static tree: what each level expanded, and what the final rerank kept)."""
    if trace is None or not trace.levels:
        return ""
    rows = level_rows(trace)
    stop = f"<div><small>{esc(why_stopped(trace))}</small></div>" if trace.draft_stop else ""
    if trace.tree is not None and trace.tree.policy == "static":
        columns = (("d", "depth, from d = 0 (the first drafted token), as in the tree"),
                   ("frontier", "parents expanded at this depth (one batched draft forward)"),
                   ("scored", "children scored: each parent's best K, all of them joining the pool"),
                   ("expanded next", "the K best of this level by p(u): the next level's frontier"),
                   ("in the tree", "nodes of this depth that the final rerank kept (the best N of the pool by p(u))"))
        table = table_html(columns, [((r.depth, "d"), (r.frontier, "d"), (r.scored, "d"), (r.kept, "d"),
                                      (r.in_tree, "d")) for r in rows])
        pool, kept = sum(r.scored for r in rows), len(trace.nodes)
        deepest = max((n.depth for n in trace.nodes), default=-1)
        note = (f"{len(rows)} levels grown; every scored candidate joins the pool ({num(pool, 'd')} in all) and the "
                f"final rerank keeps the best {num(kept, 'd')} by p(u), down to d = {num(deepest, 'd')}.")
        return f"{table}<div><small>{esc(note)}</small></div>{stop}"
    columns = (("d", "depth, from d = 0 (the first drafted token), as in the tree"),
               ("frontier", "parents expanded at this depth (one batched draft forward)"),
               ("scored", "children scored (per parent only the best few can survive)"),
               ("m_d", TIPS["m_d"]), ("μ·m_d", TIPS["μ·m_d"]), ("kept", TIPS["kept"]),
               ("cut: gate", "scored candidates below μ·m_d"),
               ("cut: budget", "scored candidates that passed the gate but found no room under the node budget N"),
               ("cut: Top-K", "scored candidates past the Top-K width (the first k levels)"),
               ("passing, unscored", "children below each parent's best N − |T| that would have passed the gate "
                                     "too: the budget cut them without scoring them"),
               ("budget left", "N minus the nodes kept so far"))
    table = table_html(columns, [((r.depth, "d"), (r.frontier, "d"), (r.scored, "d"), (r.anchor, ".3g"),
                                  (r.gate, ".3g"), (r.kept, "d"), (r.cut_gate, "d"), (r.cut_budget, "d"),
                                  (r.cut_topk, "d"), (r.unscored, "d"), (r.budget_left, "d")) for r in rows])
    note = "On every row kept + cut (gate, budget, Top-K) = scored."
    return f"{table}<div><small>{esc(note)}</small></div>{stop}"


def message_html(text: str) -> str:
    return f'<div class="ss-note">{esc(text)}</div>'


def compat_html(r: CompatReadout) -> str:
    """Does the head fit the target? The head (layout, taps and the rule that chose them), acceptance at the
    first draft positions, the draft vocabulary's coverage of the text, and a warning when position-0
    acceptance is implausibly low for a head (what vLLM and SGLang users check by hand)."""
    if not r.steps:
        return ""
    accs = " · ".join(f"d={d}: {num(a, '.0%')} of {num(n, 'd')}" for d, (a, n) in enumerate(zip(r.acceptance, r.reached)))
    beyond = len(r.drafted) - len(r.reached)
    if beyond > 0:
        accs += f" · d={len(r.reached)}–{len(r.drafted) - 1}: drafted, but no step's target got that far"
    parts = [f"acceptance by draft position (of the steps whose target got to it: every earlier position "
             f"accepted): {accs}"]
    if r.head:
        h = r.head
        taps = ",".join(map(str, h.get("taps") or [])) or "?"
        parts.insert(0, f"head: {esc(h.get('dialect'))} layout, taps {esc(taps)} ({esc(h.get('tap_rule'))}), "
                        f"draft vocabulary {num(h.get('draft_vocab'), 'd')} of {num(h.get('vocab'), 'd')}"
                        + (f"; {esc(h.get('trained'))}" if h.get("trained") else "")
                        + (f"; {esc(h.get('scoring'))}" if h.get("scoring") else ""))
    if r.coverage is not None:
        parts.append(f"the draft vocabulary holds {num(r.coverage, '.0%')} of the committed text")
    elif r.head:
        parts.append("the draft vocabulary's coverage of the text: not recorded for this run")
    warnings = [r.warning] if r.warning else []
    if r.head and isinstance(r.head.get("warnings"), (list, tuple)):
        warnings += [f"the head loaded with a warning: {w}" for w in r.head["warnings"]]
    warn = "".join(f'<div class="ss-alert" role="alert">⚠ {esc(w)}</div>' for w in warnings)
    return f'<div class="ss-note ss-compat">{"<br>".join(parts)}</div>{warn}'


def compare_cards(headers: list[str], rows: list[list]) -> str:
    """Compare's table as one card per method, for a phone (the page shows these instead of the table under
    640 px: a 7-column table there leaves each column a character wide)."""
    cards = []
    for row in rows:
        fields = "".join(f"<dt>{esc(h)}</dt><dd>{esc(v)}</dd>" for h, v in zip(headers[1:], row[1:]))
        cards.append(f'<div class="ss-card"><b>{esc(row[0])}</b><dl>{fields}</dl></div>')
    return f'<div class="ss-cards">{"".join(cards)}</div>'
