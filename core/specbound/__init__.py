"""SpecBound: the target drafts with its own shallow layers (exit heads), then verifies exactly.

Entry point: method.py (SpecBoundMethod.step, numbered 1-5 like the paper's algorithm box). Then:

    annealing.py  ACT, the annealed confidence threshold: where a drafted token may exit, what a check costs
    draft.py      drafting token after token (ACT + BSCS) until the block is bounded
    block.py      the step's block: how deep each token was computed, and the exact verification pass
    display.py    what only the page shows: every layer's exit confidence for each drafted token

The exit heads themselves are core/model/layer_heads.py and core/model/exit_heads.py (the self drafter reads
them too).
"""
