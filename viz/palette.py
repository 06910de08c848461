"""One set of colours for every view, so 'accepted' looks the same in the tree, the text and the bars."""
from __future__ import annotations

STATUS_COLORS = {
    "accepted": "#1a9850",  # green: the target agreed
    "rejected": "#d73027",  # red: the target saw it and picked something else
    "unreached": "#9e9e9e",  # grey: its parent was never accepted, so the target never judged it
    "pruned": "#8c8c8c",  # faint: scored by the policy but cut (gate, budget, Top-K, rerank)
    "root": "#3f6fd8",  # the last committed token (mid blue: visible on light and dark)
    "bonus": "#f4a500",  # the target's own token that ends every step
    "more": "#b0b0b0",  # a folded group of children ("+27 more")
    "drafted": "#7b61a8",  # drafted, not yet judged: the walk's stages before verification (viz/walk.py)
    "focus": "#e6550d",  # the ring around what a walk stage is about
}
STATUS_LABELS = {
    "accepted": "accepted by the target",
    "rejected": "rejected by the target",
    "unreached": "never reached",
    "pruned": "pruned (scored, not kept)",
    "bonus": "bonus token (target's choice)",
    "more": "folded children (hover to list)",
    "drafted": "drafted (not yet verified)",
    "focus": "this stage",
}
# Soft background hues that cycle step by step in the generated text.
STEP_HUES = ["#deebf7", "#fee6ce", "#e5f5e0", "#efedf5", "#fde0dd", "#f7fcb9", "#e0f3f8", "#fff2cc"]
METHOD_COLORS = {"ar": "#636363", "chain": "#9467bd", "static": "#1f77b4", "talon": "#e6550d",
                 "specbound": "#31a354"}
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"


def step_hue(step: int) -> str:
    return STEP_HUES[step % len(STEP_HUES)]
