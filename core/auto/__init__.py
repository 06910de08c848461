"""`auto`: the tree budget N (and T_shape) chosen per step from this machine's measured costs.

Entry point: budget.py (AutoState.choose_budget: the per-step schedule). Then:

    config.py             its settings, declared once, each with why
    cost_model.py         t_verify(n) and t_draft(width), measured here (kept by core/model/cost_cache.py)
    replay.py             what auto keeps of each recent tree step
    predict.py            what each budget would have done, replayed on the recent trees
    shape_calibration.py  T_shape fitted to the drafter against the target's own choices
"""
