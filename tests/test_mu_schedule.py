"""Runtime-adaptive μ: the rule on hand-made levels, lossless greedy and sampled decoding, μ per step in the
trace and its export, the CLI flag, the page's control and the τ/δ plot."""
import json

import pytest

from cli.generate import main as generate_main
from core.drafters.draft_lm import ModelDrafter
from core.drafters.lookup import LookupDrafter
from core.engine import Session
from core.methods import build_method
from core.sampling import SamplingConfig
from core.trace import ROOT, LevelTrace, PrunedCandidate, StepTrace
from core.trees.mu_schedule import AdaptiveMu
from tests.handler_helpers import step
from tests.tiny_models import tiny_lm
from viz.outcome_figs import tau_delta_timeline


def levels(*cuts: int) -> list[LevelTrace]:
    return [LevelTrace(d, 1, 4, 2, cut_by_gate=c) for d, c in enumerate(cuts)]


def cut(token: int, parent: int, depth: int, reason: str = "gate") -> PrunedCandidate:
    return PrunedCandidate(token, "", parent, depth, 0.1, 0.01, reason)


def test_the_rule_raises_mu_off_the_bottom_lowers_it_where_the_gate_cut_the_targets_choice_and_stays_in_bounds():
    rule = AdaptiveMu(factor=2.0, lo=0.01, hi=0.4)
    assert rule.next(0.1, [0, 1, 2], levels(0, 1, 1), [], 7) == 0.2  # the path reached the last level: deeper
    gate_cut_7 = [cut(9, 0, 1), cut(7, 0, 1)]  # depth 1, children of node 0
    assert rule.next(0.1, [0], levels(0, 2, 0), gate_cut_7, 7) == 0.05  # the gate cut the target's pick: wider
    assert rule.next(0.1, [0], levels(0, 2, 0), gate_cut_7, 8) == 0.1  # it cut others, not the pick: unchanged
    assert rule.next(0.1, [1], levels(0, 2, 0), gate_cut_7, 7) == 0.1  # the same token under another parent
    assert rule.next(0.1, [0], levels(0, 2, 0), [cut(7, 0, 1, "budget")], 7) == 0.1  # the budget's cut, not μ's
    assert rule.next(0.1, [], levels(0, 3), [cut(7, ROOT, 0, "topk")], 7) == 0.1  # the root's Top-K is not the gate
    assert rule.next(0.3, [0, 1], levels(0, 0), [], 1) == 0.4
    assert rule.next(0.015, [0], levels(0, 5), [cut(3, 0, 1)], 3) == 0.01
    assert rule.next(0.1, [], [], [], 0) == 0.1


def test_adaptive_mu_is_lossless_moves_and_is_recorded(target, draft, heldout_prompts, ar_reference):
    seen = set()
    for prompt in heldout_prompts[:4]:
        _, ar_ids = ar_reference(target, prompt, 32)
        method = build_method("talon", preset="embedded", mu_schedule="adaptive")
        res = Session(target, method, prompt, max_new_tokens=32, draft=ModelDrafter(draft)).generate()
        assert res.output_ids == ar_ids
        assert all(t.tree.mu_schedule == "adaptive" for t in res.traces)
        seen |= {t.tree.knob("mu") for t in res.traces}
        back = StepTrace.from_dict(json.loads(json.dumps(res.traces[-1].to_dict())))
        assert back.tree.mu_schedule == "adaptive" and back.tree.knob("mu") == res.traces[-1].tree.knob("mu")
    assert len(seen) > 1  # μ moved


def test_two_sessions_keep_their_own_mu():
    lm = tiny_lm("llama", seed=0, num_hidden_layers=2)
    method = build_method("talon", N=8, K=2, mu=0.1, mu_schedule="adaptive")
    a = Session(lm, method, [5, 9, 5, 9, 5], max_new_tokens=12, draft=LookupDrafter(lm.vocab_size))
    b = Session(lm, method, [3, 4, 6, 8, 11], max_new_tokens=12, draft=LookupDrafter(lm.vocab_size))
    for _ in range(3):
        a.step()
    assert b.step().tree.knob("mu") == 0.1  # b starts from the knob, whatever a did


def test_sampled_adaptive_mu_reproduces_sampled_ar_for_the_same_seed():
    lm, d = tiny_lm("llama", seed=0, num_hidden_layers=4), tiny_lm("llama", seed=7, num_hidden_layers=1)
    sampling = SamplingConfig(0.9, 0.95, seed=3)
    ar = Session(lm, build_method("ar"), [5, 17, 33, 8], sampling, max_new_tokens=24).generate().output_ids
    got = Session(lm, build_method("talon", N=12, K=3, mu=0.05, mu_schedule="adaptive"), [5, 17, 33, 8], sampling,
                  max_new_tokens=24, draft=ModelDrafter(d)).generate()
    assert got.output_ids == ar


def test_the_cli_takes_the_schedule_and_refuses_a_bad_one(capsys):
    with pytest.raises(SystemExit) as exc:
        generate_main(["--method", "talon", "--mu-schedule", "sometimes", "--prompts", "assets/prompts/heldout.jsonl"])
    assert exc.value.code == 2 and "fixed, adaptive" in capsys.readouterr().err


def test_the_page_runs_the_schedule_and_plots_mu():
    out = step(None, mu_schedule="adaptive", drafter="lookup")
    run = step(out["run"], mu_schedule="adaptive", drafter="lookup")["run"]
    assert dict(run.config.knobs)["mu_schedule"] == "adaptive" and run.traces[0].tree.mu_schedule == "adaptive"
    fig = tau_delta_timeline(run.traces)
    assert [t.meta for t in fig.data if t.meta == "mu"] == ["mu"] and fig.layout.yaxis2.title.text == "μ"
