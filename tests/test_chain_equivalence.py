import pytest
"""Greedy chain speculative decoding reproduces greedy AR decoding token for token."""
from core.drafters.draft_lm import ModelDrafter
from core.lossless_check import assert_equivalent, check_greedy_equivalence
from core.methods import build_method


@pytest.mark.slow
def test_greedy_chain_equals_ar_on_heldout_prompts(target, draft, heldout_prompts, ar_reference):
    prompts = heldout_prompts[:20]
    assert len(prompts) >= 20
    methods = [(f"chain γ={g}", build_method("chain", gamma=g)) for g in (1, 3, 6)]
    report = check_greedy_equivalence(target, lambda: ModelDrafter(draft), prompts, methods, reference=ar_reference)
    assert report.compared == 60
    assert_equivalent(report)


def test_chain_trace_records_the_step(target, draft, heldout_prompts):
    from core.engine import Session
    s = Session(target, build_method("chain", gamma=4), heldout_prompts[0], max_new_tokens=16, draft=ModelDrafter(draft))
    t = s.step()
    assert t.delta == 4 and t.target_forwards == 1 and len(t.nodes) == 4
    assert t.tau == t.accepted + 1 == len(t.committed_ids)
    assert [n.parent for n in t.nodes] == [-1, 0, 1, 2]
    assert all(0 < n.q <= 1 and n.p is not None for n in t.nodes)
    statuses = [n.status for n in t.nodes]
    assert statuses[: t.accepted] == ["accepted"] * t.accepted
    if t.accepted < 4:
        assert statuses[t.accepted] == "rejected"
    assert t.choices[-1].token_id == t.committed_ids[-1]
    assert t.draft_ms > 0 and t.verify_ms > 0
