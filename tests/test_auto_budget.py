import pytest
"""`auto` picks N per step from measured costs and the run's own acceptance: lossless, bounded steps,
small trees where verification costs grow with size (CPU-like) and large where they do not (GPU-like)."""
from core.auto_budget import GRID, AutoState
from core.cost_model import CostModel
from core.drafters import LookupDrafter, ModelDrafter
from core.engine import Session
from core.methods import build_method
from core.trace import DraftNode, StepTrace

NS = [1, 16, 128]


def cost(flat: bool) -> CostModel:
    verify = [10.0, 10.5, 11.0] if flat else [10.0, 25.0, 130.0]
    return CostModel("test", NS, verify, [1, 32], [1.0, 1.2])


def chain_trace(n: int, accepted: int, q: float = 0.9) -> StepTrace:
    t = StepTrace(0, "talon", 10, build_ms=0.5, delta=n)
    score = 1.0
    for i in range(n):
        score *= q
        t.nodes.append(DraftNode(5, "x", i - 1, i, q, score, status="accepted" if i < accepted else "rejected"))
    return t


def test_the_prior_is_small_when_verification_grows_and_large_when_it_is_flat():
    assert AutoState.start(cost(flat=False), 96).N <= 8
    assert AutoState.start(cost(flat=True), 96).N >= 64


def test_n_moves_one_notch_per_step_towards_what_pays():
    state = AutoState.start(cost(flat=True), 128)
    state.N = n = 8
    resting, used = [8], []
    for _ in range(16):  # every tree is accepted whole: bigger trees pay on flat costs
        state.observe(chain_trace(n, n), static=False, used_n=n)
        n = state.choose().N
        used.append(n)
        resting.append(state.N)
    moves = [GRID.index(b) - GRID.index(a) for a, b in zip(resting, resting[1:])]
    assert all(0 <= d <= 1 for d in moves) and resting[-1] > 8
    assert all(GRID.index(u) - GRID.index(r) in (0, 1) for u, r in zip(used, resting[1:]))  # explore one notch up
    assert state.last.reason and state.last.predicted


def test_n_shrinks_when_deep_nodes_are_never_accepted_on_a_cpu_like_curve():
    state = AutoState.start(cost(flat=False), 96)
    state.N = n = 32
    for _ in range(8):
        state.observe(chain_trace(n, 1, q=0.5), static=False, used_n=n)
        n = state.choose().N
    assert state.N < 32


@pytest.mark.slow
def test_auto_is_lossless_and_records_its_choice(target, draft, heldout_prompts, ar_reference):
    for prompt in heldout_prompts[:3]:
        _, ar_ids = ar_reference(target, prompt, 32)
        for name in ("talon", "static"):
            for d in (ModelDrafter(draft), LookupDrafter(target.vocab_size)):
                res = Session(target, build_method(name, N=64, auto=1), prompt, max_new_tokens=32, draft=d).generate()
                assert res.output_ids == ar_ids, (name, d.name)
                assert all(t.auto is not None and 1 <= t.auto.N <= 64 and t.auto.reason for t in res.traces)
                assert all(len(t.nodes) <= t.auto.N for t in res.traces)
