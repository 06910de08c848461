"""One set of colours for every view, so 'accepted' looks the same in the tree, the text and the bars. The
statuses come from the Okabe-Ito palette, chosen to stay apart under the common colour-vision deficiencies
(accepted blue, rejected vermillion), and every status also has its own marker shape (STATUS_SYMBOLS), so
nothing is told by hue alone."""
from __future__ import annotations

STATUS_COLORS = {
    "accepted": "#0072b2",  # blue: the target agreed
    "rejected": "#d55e00",  # vermillion: the target saw it and picked something else
    "unreached": "#9e9e9e",  # grey: its parent was never accepted, so the target never judged it
    "pruned": "#8c8c8c",  # faint: scored by the policy but cut (gate, budget, Top-K, rerank)
    "root": "#3f6fd8",  # the last committed token (mid blue: visible on light and dark)
    "bonus": "#e69f00",  # gold (Okabe-Ito's orange): the target's own token that ends every step (a star)
    "bonus_text": "#8a4b00",  # dark amber: the bonus underline in the text, dark enough to read on every step hue
    "more": "#b0b0b0",  # a folded group of children ("+27 more")
    "drafted": "#7b61a8",  # drafted, not yet judged: the walk's stages before verification (viz/walk.py)
    "focus": "#e6550d",  # the ring around what a walk stage is about
}
STATUS_SYMBOLS = {  # the shape of each status in the tree: a second channel beside the colour
    "root": "circle", "accepted": "circle", "rejected": "x", "unreached": "circle-open", "drafted": "diamond",
    "pruned": "circle-open", "more": "square", "bonus": "star",
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
