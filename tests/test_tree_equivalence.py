import pytest
"""Greedy static and TALON trees reproduce greedy AR output; tree steps leave exact caches behind."""
import torch

from core.drafters.draft_lm import ModelDrafter
from core.engine import Session
from core.lossless_check import assert_equivalent, check_greedy_equivalence
from core.methods import build_method
from tests.tiny_models import tiny_lm

CONFIGS = [
    ("talon N=60 K=10 μ=0.03", build_method("talon", N=60, K=10, mu=0.03)),
    ("talon N=16 K=4 μ=0.2", build_method("talon", N=16, K=4, mu=0.2)),
    ("talon N=32 K=6 μ=0.1 k=2", build_method("talon", N=32, K=6, mu=0.1, k_init=2)),
    ("static N=60 K=10 D=8", build_method("static", N=60, K=10, depth=8)),
    ("static N=8 K=2 D=3", build_method("static", N=8, K=2, depth=3)),
]


@pytest.mark.slow
def test_greedy_trees_equal_ar_on_heldout_prompts(target, draft, heldout_prompts, ar_reference):
    prompts = heldout_prompts[:20]
    report = check_greedy_equivalence(target, lambda: ModelDrafter(draft), prompts, CONFIGS, reference=ar_reference)
    assert report.compared == 20 * len(CONFIGS)
    assert_equivalent(report)


def test_static_with_K1_gives_the_same_steps_as_chain(target, draft, heldout_prompts):
    for prompt in heldout_prompts[:3]:
        chain = Session(target, build_method("chain", gamma=4), prompt, max_new_tokens=24, draft=ModelDrafter(draft)).generate()
        static = Session(target, build_method("static", N=4, K=1, depth=3), prompt, max_new_tokens=24,
                         draft=ModelDrafter(draft)).generate()
        assert static.output_ids == chain.output_ids
        assert [t.tau for t in static.traces] == [t.tau for t in chain.traces]


def ar_cache(lm, ids):
    cache = lm.new_cache()
    for i, tok in enumerate(ids):
        lm.forward([tok], [i], cache)
    return cache


def test_caches_after_tree_steps_equal_running_the_committed_tokens_autoregressively():
    target, draft = tiny_lm("llama", seed=0), tiny_lm("llama", seed=3, num_hidden_layers=1)
    for name in ("talon", "static"):
        s = Session(target, build_method(name, N=12, K=3, mu=0.05, depth=3), [4, 9, 13, 2, 7], max_new_tokens=40,
                    draft=ModelDrafter(draft))
        for _ in range(4):
            s.step()
        for lm, cache in ((target, s.tcache), (draft, s.drafter.cache)):
            n = cache.length
            assert n >= len(s.ids) - 2  # only the pending tail is missing
            ref = ar_cache(lm, s.ids[:n])
            torch.testing.assert_close(cache.k[:, :, :n], ref.k[:, :, :n], atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(cache.v[:, :, :n], ref.v[:, :, :n], atol=1e-5, rtol=1e-4)


def test_tree_trace_is_complete_enough_to_draw(target, draft, heldout_prompts):
    s = Session(target, build_method("talon", N=24, K=4, mu=0.05), heldout_prompts[1], max_new_tokens=16, draft=ModelDrafter(draft))
    t = s.step()
    assert 1 <= len(t.nodes) <= 24 and t.delta == len(t.levels)
    assert all(n.parent < i for i, n in enumerate(t.nodes))
    assert all(n.p is not None and n.text is not None for n in t.nodes)
    for i in t.accepted_path:
        assert t.nodes[i].status == "accepted"
    assert len(t.choices) == t.accepted + 1 and t.choices[-1].token_id == t.committed_ids[-1]
    assert t.levels[0].gate is None and all(lvl.gate is not None for lvl in t.levels[1:])
    assert all(c.text for c in t.pruned)
    assert t.build_ms >= 0 and t.draft_ms > 0 and t.verify_ms > 0
