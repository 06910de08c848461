"""What each view shows for a run at a replayed step: figures and HTML from viz/, built only from the
stored traces (replay never recomputes anything)."""
from __future__ import annotations

from ui.run import Run
from viz.exits_fig import confidence_heatmap, exit_bars, why_stopped
from viz.escape import num
from viz.html import budget_html, compat_html, levels_html, message_html, stats_html, text_html
from viz.run_heatmap import run_heatmap
from core.metrics import acceptance_by_depth
from viz.outcome_figs import depth_acceptance_bars, oracle_scatter, tau_delta_timeline
from viz.tree_fig import natural_height, tree_figure


def clamp(run: Run | None, index: int | None) -> int | None:
    """The step to show: the requested one if it exists, else the latest."""
    if run is None or not run.traces:
        return None
    last = len(run.traces) - 1
    return last if index is None else max(0, min(int(index), last))


def outcome_panels(run: Run | None, index: int | None) -> dict:
    """Text, τ/δ timeline, (δ, τ) scatter and stats: under every stepping view."""
    if run is None or index is None:
        return dict(text=message_html("Press Step (or Play) to start."), timeline=tau_delta_timeline([]),
                    scatter=oracle_scatter({}), stats=message_html("No steps yet."))
    traces = run.traces
    series = {run.config.method: traces[: index + 1]}
    shadows = [run.shadows[i] for i in sorted(run.shadows) if i <= index]
    if shadows:
        series["static (same prefix)"] = shadows
    note = message_html(run.note) if run.note else ""
    return dict(text=text_html(run.prompt_parts(), traces, index), timeline=tau_delta_timeline(traces, index),
                scatter=oracle_scatter(series), stats=note + stats_html(run.stats()))


def streamed_texts(run: Run, new_steps: int = 1) -> list[str]:
    """The text with the last `new_steps` steps' committed tokens revealed one more at a time (the full text,
    the last step's own output, is not among them): Play streams each tick's tokens as they commit."""
    if run is None or not run.traces:
        return []
    n = len(run.traces)
    frames = []
    for i in range(max(0, n - new_steps), n):
        frames += [text_html(run.prompt_parts(), run.traces, i, k) for k in range(1, len(run.traces[i].committed_texts))]
        if i < n - 1:
            frames.append(text_html(run.prompt_parts(), run.traces, i))
    return frames


def on(trace) -> str:
    """Which drafter proposed the tree, for the figure titles."""
    return f" on {trace.drafter}" if trace.drafter else ""


def tau_text(trace) -> str:
    """τ with Σp(u) beside it (the drafter's estimate of the accepted count), then δ."""
    score = "" if trace.score_sum is None else f" (Σp(u) = {trace.score_sum:.2f})"
    return f"τ = {trace.tau}{score}, δ = {trace.delta}"


def whose(run) -> str:
    """'your run · ' on the visitor's own live run; a preview or an imported trace says what it is in its label."""
    return "" if getattr(run, "label", "") else "your run · "


def static_levels(shadow) -> str:
    """' · 9 levels grown, 7 in the tree after the rerank': a static tree grows D + 1 levels (δ = D + 1) and its
    final rerank may keep fewer, so the levels drawn and δ are both explained."""
    grown = len(shadow.levels)
    kept = max((n.depth for n in shadow.nodes), default=-1) + 1
    if not grown:
        return ""
    return f" · {grown} levels grown" + (f", {kept} in the tree after the rerank" if kept < grown else "")


def steady_height(run: Run | None, index: int | None) -> int:
    """The trees' height: enough for the deepest tree of the run so far (its static shadows too), so replaying
    an earlier, shallower step does not move the page, and the replay slider, under the pointer."""
    if run is None or index is None:
        return natural_height(None)
    shown = run.traces[: index + 1] if run.label else run.traces  # an imported trace: up to the shown step
    return max(natural_height(t) for t in [*shown, *run.shadows.values()])


def tree_panels(run: Run | None, index: int | None, show_pruned: bool = True, with_static: bool = True) -> dict:
    """The TALON view of one step: its tree, the static tree beside it (unless turned off), the budget, the
    levels table and acceptance by depth over the run so far."""
    index = clamp(run, index)
    trace = None if index is None else run.traces[index]
    shadow = None if index is None else run.shadows.get(index)
    title = "" if trace is None else (f"{run.config.method.upper()}{on(trace)} · {whose(run)}step {index + 1} · "
                                      f"{tau_text(trace)}{run.label}")
    height = steady_height(run, index)  # side by side: levels line up
    if shadow is None:
        static = tree_figure(None, title="Static EAGLE-style tree (same prefix, same N)", height=height)
        if trace is not None:
            static.layout.annotations[0].text = ("Computing the static tree for this prefix…" if with_static else
                                                 "Static tree off: tick “draft the static tree” to draw it")
    else:
        static = tree_figure(shadow, show_pruned, f"STATIC{on(shadow)} (D={num(shadow.tree.knob('depth'), 'g')}, "
                                                  f"N={num(shadow.tree.knob('N'), 'g')}) · {tau_text(shadow)}"
                                                  f"{static_levels(shadow)}", height)
    shown = [] if index is None else run.traces[: index + 1]
    return dict(tree=tree_figure(trace, show_pruned, title, height), static=static, budget=budget_html(trace),
                compat="" if run is None else compat_html(run.readout()), levels=levels_html(trace),
                acceptance=depth_acceptance_bars(acceptance_by_depth(shown)))


HEAD_KINDS = {"paper": "a light LM head of its own per layer (the paper's kind)",
              "trained": "adapters over the model's own final norm and LM head (shared, ours)"}


def heads_note(trace) -> str:
    """Which heads the exits read, and how often each layer's head agrees with the last layer (held out)."""
    d = trace.specbound
    heads = None if d is None else d.heads
    if heads == "logit-lens":
        return ("Exit heads: none trained for this model, so each layer is read through the model's own final norm "
                "and LM head (the logit lens), which was only ever trained on the last layer: a shallow layer's "
                "confidence here is not the chance that it agrees with the last layer (it can be high and wrong).")
    if not heads:
        return ""
    lens = d.lens_agreement if len(d.lens_agreement) == len(d.head_agreement) else []
    agree = "; ".join(f"ℓ{ell} {a:.0%}" + (f" (lens {lens[ell - 1]:.0%})" if lens else "")
                      for ell, a in enumerate(d.head_agreement, start=1))
    than = " (in brackets: the logit lens on the same text, before these heads were trained)" if lens else ""
    agree = f" Held-out agreement with the last layer{than}: {agree}." if agree else ""
    return f"Exit heads: {HEAD_KINDS.get(heads, heads)}.{agree}"


def checks_note(trace) -> str:
    """Which layers have an exit check, and what one check costs (δ counts them in layer equivalents)."""
    d = trace.specbound
    if d is None:
        return ""
    layers, cost, evals = d.exit_layers, d.head_cost_layers, d.head_evals
    where = (f"Exit checks at layers {', '.join(map(str, layers))} (d_max always)" if layers else
             "No exit layer lies between the lowest exit layer and d_max: every token runs d_max layers")
    spent = f"; this step made {evals} checks = {evals * cost:.2f} layers"
    above = (f" d_max = {d.d_max_asked} is above L = {d.num_layers}, so it bounds nothing: the same drafts as "
             f"d_max = {d.num_layers}, where a token always exits." if d.d_max_asked > d.num_layers else "")
    vocab = {None: "", 0: " Checks score the whole vocabulary (the paper)."}.get(
        d.exit_vocab, f" Checks score the V_exit = {d.exit_vocab} most frequent tokens, renormalised over them "
                      f"(ours, not the paper's); other tokens cannot exit early.")
    final = (f" The model's final norm and LM head cost {d.final_head_layers:.2f} layers (measured): a verification "
             f"pays them once, plain decoding once a token (the stats' costed R counts them)."
             if d.final_head_layers > 0 else "")
    return (f"{where}. One exit-head check costs {cost:.2f} layer equivalents (measured){spent}, counted in δ "
            f"beside the layers run.{above}{vocab}{final}")


def exit_panels(run: Run | None, index: int | None, annealed: bool = True) -> dict:
    """The SpecBound view of one step: the run's layer × token heatmap, exit depths and why it stopped."""
    index = clamp(run, index)
    trace = None if index is None else run.traces[index]
    why = message_html("No step yet.") if trace is None else (
        budget_html(trace) + message_html(why_stopped(trace)) + message_html(checks_note(trace))
        + message_html(heads_note(trace)))
    heatmap = confidence_heatmap(None) if trace is None else run_heatmap(run.traces, index, annealed)
    if trace is not None and run.label:
        heatmap.layout.title.text += run.label
    return dict(heatmap=heatmap, bars=exit_bars(trace), why=why)
