"""Tree speculative decoding on any drafter: chain, static and TALON share one step loop.

Entry point: method.py (TreeMethod.step, numbered 0-4: draft -> verify -> commit -> tell the drafter). Then:

    policies.py     how a tree grows from the drafter's q: chain, static (EAGLE's), TALON's budgeted gate
    mu_schedule.py  the adaptive μ schedule (ours, not the paper's)

The tree itself (parent pointers, masks, positions) is core/draft_tree.py; every package drafts over it.
"""
