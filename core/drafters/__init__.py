"""Drafters: where q comes from, behind one small contract.

Entry point: contract.py (the Drafter protocol, BaseDrafter's defaults, node_mask). Then one module per
built-in drafter:

    draft_lm.py        `model`: a separate small LM of the target's family
    lookup.py          `lookup`: prompt lookup, no model
    self_drafter.py    `self`: the target's own first ℓ layers and its exit head there
    shallow_verify.py  the verification forward that reuses what the self drafter computed
    lookup_mix.py      a model drafter's q with prompt lookup's mixed in (the knob lookup_mix)

The EAGLE-3 drafter is core/eagle3/drafter.py; name -> factory is core/drafter_registry.py.
"""
