"""`auto` picks N per step from measured costs and the run's own acceptance: lossless, bounded steps,
small trees where verification costs grow with size (CPU-like) and large where they do not (GPU-like)."""
import pytest

from core.auto.budget import AutoMemory, AutoState
from core.auto.config import DEFAULT
from core.auto.cost_model import CostModel
from core.auto.replay import replay_of, tau_of
from core.drafters.draft_lm import ModelDrafter
from core.drafters.lookup import LookupDrafter
from core.engine import Session
from core.methods import build_method
from core.trace import AutoChoice, DraftNode, StepTrace

NS = [1, 16, 128]
GRID, EXPLORE_EVERY, EXPLORE_UP, MAX_MOVE = DEFAULT.grid, DEFAULT.explore_every, DEFAULT.explore_up, DEFAULT.max_move
MIN_PAIRED, NUDGE_EVERY, SURVEY_STEPS = DEFAULT.min_paired, DEFAULT.nudge_every, DEFAULT.survey_steps


def cost(flat: bool) -> CostModel:
    verify = [10.0, 10.5, 11.0] if flat else [10.0, 25.0, 130.0]
    return CostModel("test", NS, verify, [1, 32], [1.0, 1.2])


def chain_trace(n: int, accepted: int, q: float = 0.9, index: int = 0, costs: CostModel | None = None) -> StepTrace:
    """A chain of n drafted nodes, the first `accepted` taken, timed as `costs` say (n levels + one verify)."""
    t = StepTrace(index, "talon", 10, build_ms=0.5, delta=n, auto=AutoChoice(n, "test"))
    if costs is not None:
        t.draft_ms, t.verify_ms = n * costs.t_draft(1), costs.t_verify(n + 1)
        t.step_ms = 0.5 + t.draft_ms + t.verify_ms
    score = 1.0
    for i in range(n):
        score *= q
        t.nodes.append(DraftNode(5, "x", i - 1, i, q, score, status="accepted" if i < accepted else "rejected"))
    t.accepted_path = list(range(min(n, accepted)))
    return t


def test_the_prior_is_small_when_verification_grows_and_large_when_it_is_flat():
    assert AutoState.start(cost(flat=False), 96).N <= 8
    assert AutoState.start(cost(flat=True), 96).N >= 64


def test_n_moves_a_bounded_step_towards_what_pays():
    state = AutoState.start(cost(flat=True), 128)
    state.N, state.survey = n, _ = 8, 0  # no survey: the walk alone
    resting, used = [8], []
    for i in range(3 * EXPLORE_EVERY):  # every tree is accepted whole: bigger trees pay on flat costs
        state.observe(chain_trace(n, n, index=i, costs=state.predictor.cost))
        n = state.choose_budget().N
        used.append(n)
        resting.append(state.N)
    moves = [GRID.index(b) - GRID.index(a) for a, b in zip(resting, resting[1:])]
    assert all(0 <= d <= MAX_MOVE for d in moves) and resting[-1] > 8
    assert all(GRID.index(u) - GRID.index(r) in range(2 * EXPLORE_UP + 1) for u, r in zip(used, resting[1:]))


def two_level_trace(n: int, index: int, costs: CostModel) -> StepTrace:
    """Nine siblings at depth 0, then their first one's children: the target takes node 0 and node 9."""
    t = StepTrace(index, "talon", 10, build_ms=0.5, delta=2, auto=AutoChoice(n, "test"))
    t.draft_ms = costs.t_draft(1) + (costs.t_draft(9) if n > 9 else 0.0)
    t.verify_ms = costs.t_verify(n + 1)
    t.step_ms = 0.5 + t.draft_ms + t.verify_ms
    for i in range(n):
        t.nodes.append(DraftNode(5 + i, "x", -1 if i < 9 else 0, int(i >= 9), 0.1, 0.1, status="rejected"))
    t.accepted_path = [0, 9] if n > 9 else [0]
    return t


def test_a_survey_finds_a_budget_a_walk_down_would_miss():
    """A first level of up to 9 nodes commits 2 tokens whatever its width, and the first node of a second
    level a third: only a tree grown past 9 nodes can tell, and the survey grows one."""
    state = AutoState.start(CostModel("test", [1, 8, 16, 128], [10.0, 15.0, 17.0, 60.0], [1, 32], [1.0, 1.2]), 96)
    assert state.N == 8 and state.survey > 12
    used = []
    for i in range(SURVEY_STEPS + 1):
        used.append(state.choose_budget().N)
        state.observe(two_level_trace(used[-1], i, state.predictor.cost))
    assert used == [state.survey] * SURVEY_STEPS + [12]


def test_tau_of_a_truncated_tree_is_what_its_kept_nodes_committed():
    state = AutoState.start(cost(flat=False), 96)
    state.observe(chain_trace(8, 3, costs=state.predictor.cost))  # the first three of an 8-node chain accepted
    r = state.predictor.recent[0]
    assert [tau_of(r, n) for n in (0, 1, 2, 3, 8)] == [1, 2, 3, 4, 4]
    small, large = state.predictor.curves(r, [2, 8])
    assert small < large  # and the smaller tree costs less


def test_a_larger_budget_wins_only_on_trees_grown_that_large():
    state = AutoState.start(cost(flat=True), 128)
    state.N = 8
    for i in range(6):  # trees of 8, accepted whole: nothing says what 16 would commit
        state.observe(chain_trace(8, 8, index=i, costs=state.predictor.cost))
    assert state.predictor.gains([16], 8) == {} and state.predictor.rate(16) is None
    for i in range(6, 6 + MIN_PAIRED - 1):  # too few trees of 16 to compare on
        state.observe(chain_trace(16, 3, index=i, costs=state.predictor.cost))
    assert state.predictor.gains([16], 8) == {}
    state.observe(chain_trace(16, 3, index=9, costs=state.predictor.cost))  # enough: the extra nodes did not pay
    gain, se = state.predictor.gains([16], 8)[16]
    assert gain == pytest.approx(state.predictor.rate(16, 16) / state.predictor.rate(8, 16)) and gain < 1
    assert se == pytest.approx(0, abs=1e-9)  # trees alike: leaving any one out changes nothing


def test_the_cost_curve_is_read_on_its_monotone_envelope():
    c = CostModel("test", [1, 8, 12, 16], [10.0, 15.0, 22.0, 20.0], [1, 32], [1.0, 1.2])
    assert c.t_verify(12) == 20.0 and c.t_verify(16) == 20.0 and c.t_verify(8) == 15.0


def test_n_shrinks_when_deep_nodes_are_never_accepted_on_a_cpu_like_curve():
    state = AutoState.start(cost(flat=False), 96)
    state.N = n = 32
    state.survey = 0
    for i in range(2 * NUDGE_EVERY + 1):  # two decisions, the second on enough trees
        state.observe(chain_trace(n, 1, q=0.5, index=i, costs=state.predictor.cost))
        n = state.choose_budget().N
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
                assert all(len(t.nodes) <= t.auto.N and t.step_ms > 0 for t in res.traces)
                assert all(t.tree.knob("shape_temperature") == t.auto.T_shape for t in res.traces)  # the fitted T, used
                if d.name == "model":
                    assert sum(t.tree.t_nll_rows for t in res.traces) > 0


def test_a_session_carries_on_where_the_last_one_rested_only_with_a_memory():
    memory = AutoMemory()
    first = AutoState.start(cost(flat=False), 96, memory=memory, key="test-setup")
    first.N = 16
    for i in range(3):
        first.observe(chain_trace(16, 4, index=i))
    second = AutoState.start(cost(flat=False), 96, memory=memory, key="test-setup")
    assert second.N == 16 and len(second.predictor.recent) == 3 and second.choose_budget().N != second.survey
    assert not AutoState.start(cost(flat=False), 96, memory=memory, key="other-setup").predictor.recent
    assert not AutoState.start(cost(flat=False), 96, key="test-setup").predictor.recent  # the app: no memory


def test_the_curves_are_the_forwards_of_each_truncated_tree():
    """One drafter forward per level (the root's over one node, level d + 1's over the nodes at depth d),
    plus one verification over n + 1 tokens; a static tree always grows its D + 1 levels."""
    curves = CostModel("test", [1, 8, 16, 128], [10.0, 15.0, 17.0, 60.0], [1, 8, 32], [1.0, 1.5, 2.5])
    state = AutoState.start(curves, 96)
    r = replay_of(chain_trace(1, 0))
    r.depths = [0, 0, 0, 1, 1, 2]
    expected = {0: curves.t_draft(1) + curves.t_verify(1), 3: curves.t_draft(1) + curves.t_verify(4),
                5: curves.t_draft(1) + curves.t_draft(3) + curves.t_verify(6),
                6: curves.t_draft(1) + curves.t_draft(3) + curves.t_draft(2) + curves.t_verify(7)}
    assert state.predictor.curves(r, list(expected)) == pytest.approx(list(expected.values()))
    r.static_levels = 4
    assert state.predictor.curves(r, [3]) == pytest.approx([4 * curves.t_draft(1) + curves.t_verify(4)])


def test_auto_measures_its_cost_curves_when_the_session_is_built_not_in_a_step(monkeypatch, tmp_path):
    """On a machine with no cached curves the measurement happens before the first step, outside its timing."""
    import core.auto.cost_model
    from tests.tiny_models import tiny_lm
    monkeypatch.setattr(core.auto.cost_model, "CACHE_DIR", tmp_path)
    monkeypatch.setattr(core.auto.cost_model, "_MEMO", {})
    events = []
    real_curve = core.auto.cost_model._verify_curve
    monkeypatch.setattr(core.auto.cost_model, "_verify_curve", lambda *a: (events.append("measure"), real_curve(*a))[1])
    target, draft = tiny_lm("llama", seed=0), tiny_lm("llama", seed=7, num_hidden_layers=1)
    s = Session(target, build_method("talon", preset="auto"), [5, 17, 33, 8], max_new_tokens=12,
                draft=ModelDrafter(draft))
    assert events == ["measure"]
    real_step = s.method.step
    monkeypatch.setattr(s.method, "step", lambda sess: (events.append("step"), real_step(sess))[1])
    s.generate()
    assert events[0] == "measure" and events.count("measure") == 1 and events.count("step") >= 1
    Session(target, build_method("talon", preset="auto"), [5, 17], max_new_tokens=4, draft=ModelDrafter(draft))
    assert events.count("measure") == 1  # measured once per machine, model and drafter


def test_c_is_the_mean_over_the_widths_a_run_drafted():
    from core.metrics import Totals
    from core.trace import LevelTrace
    c = CostModel("test", [1, 8], [10.0, 20.0], [1, 8], [1.0, 2.0])
    assert c.c == pytest.approx(0.1) and c.c_over({}) == pytest.approx(0.1)
    assert c.c_over({1: 2, 8: 2}) == pytest.approx((2 * 1.0 + 2 * 2.0) / 4 / 10.0)
    totals = Totals()
    t = chain_trace(2, 1)
    t.levels = [LevelTrace(0, 1, 4, 2), LevelTrace(1, 8, 16, 3)]
    totals.add([t, t], 4, 0.1)
    assert totals.widths == {1: 2, 8: 2}
    assert CostModel("lookup", [1], [10.0], [], []).c_over({1: 3}) == 0.0
