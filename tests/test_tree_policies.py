"""Tree policies on hand-made draft distributions (no model): TALON's gate/budget/Top-K and the static tree."""
import pytest
import torch

from core.draft_tree import DraftTree, path_to
from core.trace import ROOT
from core.trees.policies import StaticPolicy, TalonPolicy

V = 8
A, B, C, D, E, F, G = range(1, 8)


def table_expand(table: dict, default=None):
    """expand() from {path of tokens: {token: q}}; unknown paths get `default` (or uniform)."""
    calls = []

    def expand(frontier, tree: DraftTree):
        calls.append(list(frontier))
        rows = []
        for node in frontier:
            path = () if node == ROOT else tuple(tree.tokens[i] for i in path_to(tree.parents, node))
            dist = table.get(path, default)
            row = torch.full((V,), 1e-9)
            if dist is None:
                row[:] = 1.0 / V
            else:
                for tok, q in dist.items():
                    row[tok] = q
            rows.append(row / row.sum())
        return torch.stack(rows)

    expand.calls = calls
    return expand


def paths(tree: DraftTree) -> set:
    return {tuple(tree.tokens[j] for j in path_to(tree.parents, i)) for i in range(len(tree))}


def test_spec_worked_example():
    """SPEC: N = 4, K = 2, k = 1, μ = 0.2 gives {a, b, a→d, b→f} after two draft forwards."""
    table = {(): {A: 0.6, B: 0.3, C: 0.1}, (A,): {D: 0.9, E: 0.1}, (B,): {F: 0.6, G: 0.4}}
    res = TalonPolicy(N=4, K=2, mu=0.2, k_init=1).grow(table_expand(table), max_depth=10)
    assert paths(res.tree) == {(A,), (B,), (A, D), (B, F)}
    assert res.forwards == 2 and res.stop == "budget"
    lvl = res.levels[1]
    assert lvl.anchor == pytest.approx(0.54) and lvl.gate == pytest.approx(0.108)
    assert lvl.cut_by_budget == 1  # g (0.12) passed the gate but not the budget
    cut = {(c.token_id, c.reason) for c in res.pruned if c.depth == 1}
    assert (G, "budget") in cut and (E, "gate") in cut


def test_root_keeps_top_k_however_confident_the_draft_is():
    table = {(): {A: 0.999, B: 0.0006, C: 0.0004}}
    res = TalonPolicy(N=10, K=3, mu=0.5, k_init=1).grow(table_expand(table, {D: 1.0}), max_depth=2)
    assert [res.tree.tokens[i] for i in range(3)] == [A, B, C]
    assert res.levels[0].gate is None


def test_k0_is_pure_gating_and_collapses_the_root():
    table = {(): {A: 0.999, B: 0.0006, C: 0.0004}}
    res = TalonPolicy(N=10, K=3, mu=0.03, k_init=0).grow(table_expand(table, {D: 1.0}), max_depth=2)
    depth0 = [res.tree.tokens[i] for i in range(len(res.tree)) if res.tree.depths[i] == 0]
    assert depth0 == [A]


def test_k2_forces_pooled_top_k_on_the_second_level_too():
    table = {(): {A: 0.9, B: 0.1}, (A,): {C: 0.98, D: 0.02}, (B,): {E: 0.5, F: 0.5}}
    res = TalonPolicy(N=20, K=2, mu=0.5, k_init=2).grow(table_expand(table, {G: 1.0}), max_depth=3)
    level1 = {tuple(res.tree.tokens[j] for j in path_to(res.tree.parents, i))
              for i in range(len(res.tree)) if res.tree.depths[i] == 1}
    assert level1 == {(A, C), (B, E)} or level1 == {(A, C), (B, F)}  # Top-2 by p(u): 0.882, 0.05 (tie E/F)
    assert res.levels[1].gate is None and res.levels[2].gate is not None


def test_gate_keeps_exactly_the_pooled_candidates_above_mu_m_d():
    table = {(): {A: 0.5, B: 0.5}, (A,): {C: 0.7, D: 0.2, E: 0.1}, (B,): {F: 0.4, G: 0.35, C: 0.25}}
    res = TalonPolicy(N=50, K=2, mu=0.4, k_init=1).grow(table_expand(table, {}), max_depth=2)
    # p(u): AC .35 AD .10 AE .05 | BF .20 BG .175 BC .125; m_1 = .35, gate = .14
    depth1 = {p for p in paths(res.tree) if len(p) == 2}
    assert depth1 == {(A, C), (B, F), (B, G)}
    # every one of the 2 × V children was scored (budget 48 > V); all but the 3 above the gate are cut
    assert res.levels[1].candidates == 2 * V
    assert res.levels[1].cut_by_gate == 2 * V - 3 and res.levels[1].cut_by_budget == 0


def test_budget_truncation_keeps_the_highest_scores():
    table = {(): {A: 0.5, B: 0.5}, (A,): {C: 0.4, D: 0.35, E: 0.25}, (B,): {F: 0.45, G: 0.3, C: 0.25}}
    res = TalonPolicy(N=4, K=2, mu=0.01, k_init=1).grow(table_expand(table), max_depth=5)
    depth1 = {p for p in paths(res.tree) if len(p) == 2}
    assert depth1 == {(B, F), (A, C)}  # .225 and .20 beat .175 (AD)
    assert res.stop == "budget" and len(res.tree) == 4


def test_growth_stops_at_the_depth_cap():
    table = {(): {A: 1.0}}
    res = TalonPolicy(N=10, K=1, mu=1.0, k_init=1).grow(table_expand(table, {B: 1.0}), max_depth=4)
    assert res.forwards == 4 and res.stop == "depth" and len(res.tree) == 4
    res = TalonPolicy(N=10, K=1, mu=1.0, k_init=1).grow(table_expand(table), max_depth=0)
    assert len(res.tree) == 0 and res.forwards == 0


def test_growth_stops_on_an_empty_frontier():
    """A drafter with nothing to propose (q = 0 everywhere, e.g. prompt lookup without a match) ends growth."""
    def expand(frontier, tree):
        q = torch.zeros(len(frontier), V)
        if frontier == [ROOT]:
            q[0, A] = 1.0  # one proposal at the root, none below it
        return q
    for policy in (TalonPolicy(N=10, K=2, mu=0.1), StaticPolicy(N=10, K=2, depth=5)):
        res = policy.grow(expand, max_depth=6)
        assert res.stop == "frontier" and res.tree.tokens == [A] and res.forwards == 2, policy.name


def test_frontier_empties_when_budget_is_reached_exactly():
    table = {(): {A: 0.5, B: 0.5}}
    res = TalonPolicy(N=2, K=2, mu=0.1, k_init=1).grow(table_expand(table), max_depth=9)
    assert len(res.tree) == 2 and res.forwards == 1 and res.stop == "budget"


@pytest.mark.parametrize("kwargs, msg", [
    (dict(N=0), "N"), (dict(K=0), "K"), (dict(mu=0.0), "μ"), (dict(mu=1.5), "μ"), (dict(k_init=-1), "k"),
])
def test_talon_knobs_are_validated(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        TalonPolicy(**kwargs)


def test_static_tree_shape():
    """K×K expansion per level, Top-K frontier, then the final Top-N rerank over everything generated."""
    table = {(): {A: 0.6, B: 0.4}, (A,): {C: 0.9, D: 0.1}, (B,): {E: 0.5, F: 0.5}}
    expand = table_expand(table, {G: 0.8, C: 0.2})
    res = StaticPolicy(N=5, K=2, depth=2).grow(expand, max_depth=10)
    assert res.forwards == 3  # δ = D + 1
    assert [len(c) for c in expand.calls] == [1, 2, 2]  # root, then the Top-K frontier each level
    assert [lvl.candidates for lvl in res.levels] == [2, 4, 4]
    # level 1 candidates: AC .54 AD .06 BE .2 BF .2 -> frontier AC, BE (tie broken by order)
    assert len(res.pool) == 2 + 4 + 4
    # rerank: A .6, AC .54, ACG .432, B .4, then .2 ties (BE / BF / BEG...) -> 5 nodes
    top = paths(res.tree)
    assert {(A,), (A, C), (A, C, G), (B,)} <= top and len(top) == 5
    assert all(c.reason == "rerank" for c in res.pruned)


def test_static_K1_is_a_chain():
    table = {(): {A: 0.6, B: 0.4}, (A,): {C: 0.9, D: 0.1}}
    res = StaticPolicy(N=3, K=1, depth=2).grow(table_expand(table, {E: 1.0}), max_depth=10)
    assert res.tree.parents == [ROOT, 0, 1] and res.tree.tokens == [A, C, E]


def test_tree_mask_and_positions_from_parent_pointers():
    from core.draft_tree import ancestor_matrix, tree_attention_mask, tree_positions
    parents = [ROOT, ROOT, 0, 2, 1]  # a, b, a→c, a→c→d, b→e
    anc = ancestor_matrix(parents)
    assert anc[3].tolist() == [True, False, True, True, False]
    assert anc[4].tolist() == [False, True, False, False, True]
    mask = tree_attention_mask(parents, prefix_len=3, n_pending=2, device=torch.device("cpu"))
    assert mask.shape == (7, 10)
    assert mask[0].tolist() == [True] * 4 + [False] * 6  # first pending token: prefix + itself
    assert mask[2, :5].all() and mask[2, 5:].tolist() == [True, False, False, False, False]
    assert tree_positions([0, 0, 1, 2, 1], first_node_pos=10) == [10, 10, 11, 12, 11]


def test_children_past_the_scored_ones_that_pass_the_gate_count_as_budget_cuts():
    """With one node of budget left only each parent's best child is scored; its siblings that pass the gate
    as well were cut by the budget, and the level says so."""
    table = {(): {A: 1.0}, (A,): {B: 0.3, C: 0.3, D: 0.3, E: 0.1}}
    res = TalonPolicy(N=2, K=1, mu=0.2, k_init=1).grow(table_expand(table), max_depth=3)
    lvl = res.levels[1]  # gate 0.2 · 0.3: B, C, D and E pass, one fits
    assert (lvl.kept, lvl.cut_by_budget, lvl.cut_by_gate, lvl.budget_left) == (1, 3, 0, 0)


def test_budget_left_counts_the_budget_this_step_had_near_the_context_end():
    table = {(): {A: 0.5, B: 0.5}}
    res = TalonPolicy(N=10, K=2, mu=0.01, k_init=1).grow(table_expand(table, {C: 0.5, D: 0.5}), max_depth=5,
                                                         max_nodes=3)
    assert len(res.tree) == 3 and res.stop == "budget"
    assert [lvl.budget_left for lvl in res.levels] == [1, 0]


def test_a_tiny_shaping_temperature_keeps_every_proposable_root_child():
    """softmax(z / 0.01) underflows to 0 for all but the best token; only a -inf logit means 'cannot propose',
    so the root still keeps its K children (and never the unproposable one)."""
    from types import SimpleNamespace

    from core.sampling import SamplingConfig
    from core.trees.method import Expander
    z = torch.tensor([[5.0, 0.0, -3.0, -8.0, float("-inf"), float("-inf"), float("-inf"), float("-inf")]])

    class Fixed:
        columns = None  # scores the whole vocabulary

        def room(self):
            return 100

        def propose(self, frontier, tree):
            return z.expand(len(frontier), -1)

    s = SimpleNamespace(target=SimpleNamespace(device=torch.device("cpu"), vocab_size=8), sampling=SamplingConfig())
    for most_kept in (None, 4):  # the fix runs when a row has fewer positive q than the policy may keep
        policy = TalonPolicy(N=4, K=4, mu=0.5, k_init=1)
        res = policy.grow(Expander(Fixed(), s, False, 0.01, most_kept=most_kept), max_depth=1)
        assert sorted(res.tree.tokens) == [0, 1, 2, 3]
