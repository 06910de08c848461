"""SpecBound: ACT exit rule, d_max / w_max bounds, exact (greedy-equivalent, lossless) verification."""
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from core.ar import ARMethod
from core.engine import Session
from core.lossless_check import assert_equivalent, check_greedy_equivalence
from core.metrics import curve_r, layer_parts
from core.model.exit_heads import ExitHeads, exit_vocab, heads_dir, heads_for
from core.sampling import SamplingConfig
from core.specbound.annealing import act_temperature, exits_at, layer_confidence
from core.specbound.method import SpecBoundMethod, build_specbound_method
import core.specbound.method
from tests.test_sampling_lossless import P_BROKEN, P_OK, broken_verify, chi2_pvalue, exact_first_token
from tests.tiny_models import tiny_lm

V = 64
DRAFT_TOKEN = 7  # what scripted heads propose (not EOS, which is 1 in the tiny models)


class ScriptedHeads(ExitHeads):
    """Exit heads whose confidence follows a plan: drafted token k is confident only at layer plan[k]
    (None: never). A call at layer 1 marks a new token, so use min_exit_layer = 1."""

    def __init__(self, num_layers: int, plan: list[int | None]) -> None:
        super().__init__(num_layers, 32, rank=0)
        self.plan, self.token = plan, -1

    def scores(self, lm, layer, h, vocab=None):  # a check reads scores: (T, V) here, so no ids
        if layer == 1:
            self.token += 1
        confident = self.token < len(self.plan) and self.plan[self.token] == layer
        z = torch.zeros(h.shape[0], V)  # (T, V) uniform: confidence 1/V
        z[:, DRAFT_TOKEN] = 20.0 if confident else 0.0
        return z, None


def run_step(lm, plan, prompt=(5, 17, 33, 8), max_new_tokens=32, **knobs):
    method = SpecBoundMethod(min_exit_layer=1, heads=ScriptedHeads(lm.num_layers, plan), **knobs)
    s = Session(lm, method, list(prompt), max_new_tokens=max_new_tokens)
    return s, s.step()


@pytest.fixture(scope="module")
def tiny6():
    return tiny_lm("llama", seed=0, num_hidden_layers=6)


def test_act_temperature_formula():
    assert act_temperature(0, 12, 1.5) == pytest.approx(2.5)
    assert act_temperature(6, 12, 0.5) == pytest.approx(1.25)
    assert act_temperature(12, 12, 3.0) == 1.0  # the last layer is never deflated
    assert act_temperature(3, 12, 0.0) == 1.0


def test_over_confident_shallow_layer_exits_only_without_act():
    z = torch.zeros(V)
    z[3] = 7.0  # raw max softmax e^7 / (e^7 + 63) ≈ 0.946
    raw = float(torch.softmax(z, -1).max())
    assert 0.9 < raw < 0.95
    shallow = layer_confidence(z, 2, 12, alpha=0.0)
    assert shallow.raw == pytest.approx(raw) and shallow.annealed == pytest.approx(raw) and shallow.top_id == 3
    assert exits_at(shallow, tau_exit=0.9)
    annealed = layer_confidence(z, 2, 12, alpha=2.0)  # T_2 = 1 + 2(1 - 2/12) = 2.67
    assert annealed.temperature == pytest.approx(1 + 2 * (1 - 2 / 12))
    assert annealed.annealed < 0.2 and not exits_at(annealed, tau_exit=0.9)
    assert exits_at(layer_confidence(z, 12, 12, alpha=2.0), tau_exit=0.9)  # the same logits at ℓ = L still exit


def test_act_moves_the_exit_deeper_in_the_drafting_loop(tiny6):
    class SameConfidence(ExitHeads):  # raw confidence 0.946 at every layer: α decides where it counts
        def scores(self, lm, layer, h, vocab=None):  # a check reads scores: (T, V) here, so no ids
            z = torch.zeros(h.shape[0], V)
            z[:, DRAFT_TOKEN] = 7.0
            return z, None
    exits = {}
    for alpha in (0.0, 1.0):
        method = SpecBoundMethod(alpha=alpha, tau_exit=0.5, min_exit_layer=1, d_max=6, w_max=1,
                                 heads=SameConfidence(6, 32, 0))
        t = Session(tiny6, method, [5, 17, 33, 8], max_new_tokens=8).step()
        exits[alpha] = t.exits[0]
    assert exits[0.0].exit_layer == 1 and exits[0.0].layers == [1]
    deep = exits[1.0]
    assert deep.exit_layer > 1 and deep.layers == list(range(1, deep.exit_layer + 1))
    assert all(a < 0.5 for a in deep.annealed_conf[:-1]) and deep.annealed_conf[-1] >= 0.5
    assert deep.temperature == [pytest.approx(1 + (1 - ell / 6)) for ell in deep.layers]
    assert all(r == pytest.approx(deep.raw_conf[0]) for r in deep.raw_conf)


def test_d_max_stops_drafting_at_the_first_token_that_does_not_exit(tiny6):
    s, t = run_step(tiny6, plan=[2, 3, None], d_max=4, w_max=10, alpha=0.0, tau_exit=0.9)
    assert t.draft_stop == "d_max"
    assert [e.exit_layer for e in t.exits] == [2, 3, None]
    assert [e.node for e in t.exits] == [0, 1, 2] and len(t.nodes) == 2
    assert t.exits[2].layers == [1, 2, 3, 4]  # evaluated every layer up to d_max, then gave up
    assert t.specbound.layers_draft == 2 + 3 + 4
    assert t.specbound.head_evals == 2 + 3 + 4 and t.specbound.head_cost_layers > 0
    assert t.delta == pytest.approx((9 + 9 * t.specbound.head_cost_layers) / 6)  # layers and exit checks
    assert t.specbound.exact_depths == [4, 4, 4]  # the earlier tokens were carried along to d_max: all exact
    assert t.specbound.verify_from_layer == 4 and t.specbound.layers_verify == 6 - 4
    assert t.specbound.layers_joined == 1 + 2  # the first token's layer 3, then both earlier tokens' layer 4


def test_w_max_stops_after_exactly_w_max_drafted_tokens(tiny6):
    s, t = run_step(tiny6, plan=[1] * 10, d_max=4, w_max=3, alpha=0.0, tau_exit=0.9)
    assert t.draft_stop == "w_max" and len(t.nodes) == 3 and len(t.exits) == 3
    assert [e.exit_layer for e in t.exits] == [1, 1, 1]
    assert t.specbound.layers_draft == 3  # the last drafted token is never fed while drafting
    assert t.specbound.verify_from_layer == 0


def test_length_budget_and_no_depth_bound(tiny6):
    s, t = run_step(tiny6, plan=[1] * 10, max_new_tokens=3, d_max=4, w_max=10, alpha=0.0, tau_exit=0.9)
    assert t.draft_stop == "length" and len(t.nodes) == 2  # 2 drafted + the bonus fill the budget of 3
    s, t = run_step(tiny6, plan=[None], d_max=99, w_max=1, alpha=0.0, tau_exit=0.9)
    assert t.specbound.d_max == 6 and t.exits[0].exit_layer == 6  # d_max ≥ L: the last layer always exits


def test_knob_validation():
    for bad in (dict(alpha=-1), dict(tau_exit=1.5), dict(d_max=0), dict(w_max=-2), dict(min_exit_layer=5, d_max=3),
                dict(d_max=2.5)):
        with pytest.raises(ValueError):
            build_specbound_method(**bad)
    m = build_specbound_method(w_max=0, d_max=4.0, gamma=3)  # 0 = unbounded; other methods' knobs ignored
    assert m.w_max is None and m.d_max == 4


class OracleHeads(ScriptedHeads):
    """Scripted exit depths, but proposing the AR continuation (every 5th proposal wrong), so most drafted
    tokens are accepted and their deep layers must come out exact."""

    def __init__(self, num_layers: int, plan: list[int | None], truth: list[int]) -> None:
        super().__init__(num_layers, plan)
        self.truth, self.session, self.seen_steps, self.k = truth, None, -1, 0

    def scores(self, lm, layer, h, vocab=None):  # a check reads scores: (T, V) here, so no ids
        z, _ = super().scores(lm, layer, h)
        if self.session is None:  # the check's cost, measured when the session is built
            return z, None
        if layer == 1:
            steps = len(self.session.traces)
            self.k = 0 if steps != self.seen_steps else self.k + 1
            self.seen_steps = steps
        pos = len(self.session.output_ids) + self.k
        right = pos < len(self.truth) and self.token % 5 != 4
        tok = self.truth[pos] if right else DRAFT_TOKEN
        return z[:, (torch.arange(V) - tok + DRAFT_TOKEN) % V], None  # move the planned peak onto tok


def assert_cache_exact(lm, s: Session) -> None:
    """Every committed slot's K/V equals a plain full forward's over the same tokens."""
    n = s.tcache.length
    ref = lm.new_cache()
    lm.forward(s.ids[:n], range(n), ref)
    torch.testing.assert_close(s.tcache.k[:, :, :n], ref.k[:, :, :n], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(s.tcache.v[:, :, :n], ref.v[:, :, :n], atol=1e-5, rtol=1e-4)


def test_cache_is_exact_after_mixed_depth_steps(tiny6):
    """After steps whose drafted tokens exited at different depths, every committed slot's K/V equals a
    plain full forward's, and the output equals AR."""
    ar = Session(tiny6, ARMethod(), [5, 17, 33, 8], max_new_tokens=24).generate()
    heads = OracleHeads(6, [3, 1, 4, 2, 5, 2, None, 2, 2, 3] * 4, ar.output_ids)
    method = SpecBoundMethod(min_exit_layer=1, d_max=5, w_max=4, alpha=0.0, tau_exit=0.9, heads=heads)
    s = Session(tiny6, method, [5, 17, 33, 8], max_new_tokens=24)
    heads.session = s
    res = s.generate()
    assert res.output_ids == ar.output_ids
    assert sum(t.accepted for t in res.traces) >= 8  # deep layers of accepted drafts were really checked
    assert_cache_exact(tiny6, s)


def test_cache_is_exact_when_layers_between_checks_run_in_one_call(tiny6):
    """With checks only at layers 1, 3 and 5, drafting runs layers 2-3 and 4-5 in one call unless an earlier
    token exited below them (then up to its depth, where it joins); the cache and output stay exact."""
    ar = Session(tiny6, ARMethod(), [5, 17, 33, 8], max_new_tokens=24).generate()
    heads = OracleHeads(6, [3, 1, 5, 3, 1, None, 3, 3, 5, 5] * 4, ar.output_ids)
    method = SpecBoundMethod(min_exit_layer=1, d_max=5, w_max=4, alpha=0.0, tau_exit=0.9, heads=heads,
                             exit_layers=(1, 3, 5))
    s = Session(tiny6, method, [5, 17, 33, 8], max_new_tokens=24)
    heads.session = s
    res = s.generate()
    assert res.output_ids == ar.output_ids
    assert {e.exit_layer for t in res.traces for e in t.exits} >= {1, 3, 5}
    assert all(set(e.layers) <= {1, 3, 5} for t in res.traces for e in t.exits)
    assert sum(t.specbound.layers_joined for t in res.traces) > 0  # earlier tokens joined deeper runs too
    assert_cache_exact(tiny6, s)


class LensAt(ExitHeads):
    """The logit lens, sharpened by at[layer], at the layers in `at` and no confidence elsewhere: checking
    every layer with these heads drafts what checking only `at` does, one layer per call."""

    def __init__(self, num_layers: int, at: dict[int, float]) -> None:
        super().__init__(num_layers, 32, rank=0)
        self.at = at

    def scores(self, lm, layer, h, vocab=None):  # a check reads scores: (T, V) here, so no ids
        return (lm.head(h) * self.at[layer] if layer in self.at else torch.zeros(h.shape[0], V)), None


def test_layers_run_in_one_call_draft_what_one_call_per_layer_drafts(tiny6):
    """Drafting with checks at layers 2 and 4 (layers 1-2 and 3-4 run in one call each where no earlier
    token's K/V stop short) sees the same states as checking every layer, one call each, would."""
    def steps(exit_layers):
        method = SpecBoundMethod(alpha=0.0, tau_exit=0.3, min_exit_layer=1, d_max=5, w_max=6,
                                 heads=LensAt(6, {2: 3.0, 4: 8.0}), exit_layers=exit_layers)
        return Session(tiny6, method, [5, 17, 33, 8, 21], max_new_tokens=40).generate().traces
    merged, single = steps((2, 4)), steps("all")
    seen = lambda traces: [(e.exit_layer, [round(c, 5) for c, ell in zip(e.annealed_conf, e.layers) if ell in (2, 4)],
                            [t for t, ell in zip(e.top_ids, e.layers) if ell in (2, 4)])
                           for t in traces for e in t.exits]
    assert seen(merged) == seen(single)
    assert {e.exit_layer for t in merged for e in t.exits} >= {2, 4}  # both depths, so tokens joined deeper runs
    assert sum(t.specbound.layers_joined for t in merged) > 0


@pytest.mark.parametrize("family", ["qwen3", "mistral"])
def test_greedy_equivalence_other_families(family):
    lm = tiny_lm(family, seed=1, num_hidden_layers=4)
    prompts = [[5, 17, 33, 8, 9, 10, 11], [40, 41, 12]]  # Mistral's window is 6: prompts longer than it
    methods = [("lens", SpecBoundMethod(alpha=0.5, tau_exit=0.2, d_max=3, w_max=5, min_exit_layer=1))]
    assert_equivalent(check_greedy_equivalence(lm, None, prompts, methods, max_new_tokens=24))


@pytest.mark.slow
def test_greedy_specbound_equals_ar_on_heldout_prompts(target, heldout_prompts, ar_reference):
    prompts = heldout_prompts[:20]
    assert len(prompts) >= 20
    methods = [
        ("defaults", build_specbound_method()),
        ("α=0 τ=0.2 d=6 w=4", build_specbound_method(alpha=0.0, tau_exit=0.2, d_max=6, w_max=4, min_exit_layer=1)),
        ("α=1 τ=0.3 d=L w=∞", build_specbound_method(alpha=1.0, tau_exit=0.3, d_max=99, w_max=0, min_exit_layer=2)),
        ("V_exit=256 τ=0.05", build_specbound_method(exit_vocab=256, tau_exit=0.05)),
        ("V_exit=all", build_specbound_method(exit_vocab=0)),
    ]
    report = check_greedy_equivalence(target, None, prompts, methods, max_new_tokens=16,
                                      reference=ar_reference)
    assert report.compared == 100
    assert_equivalent(report)


class FixedHeads(ExitHeads):
    """q = softmax(z) whatever the state, so the test controls how q differs from p."""

    def __init__(self, z: torch.Tensor) -> None:
        super().__init__(3, 32, rank=0)
        self.z = z

    def scores(self, lm, layer, h, vocab=None):  # a check reads scores: (T, V) here, so no ids
        return self.z.expand(h.shape[0], -1), None


def first_token_counts(lm, cfg: SamplingConfig, runs: int) -> np.ndarray:
    p = torch.from_numpy(exact_first_token(lm, SamplingConfig(1.0, 1.0)))
    order = p.argsort(descending=True)
    top = order[: int((p[order].cumsum(0) < 0.5).sum()) + 1]  # the likeliest tokens, half of p's mass
    z = torch.full((V,), -30.0)
    z[top] = p[top].log()  # q = p restricted to them: a verifier without the residual misses the rest
    method = SpecBoundMethod(alpha=0.0, tau_exit=0.0, d_max=3, w_max=2, min_exit_layer=1, heads=FixedHeads(z))
    counts = np.zeros(V)
    for seed in range(runs):
        s = Session(lm, method, [5, 17, 33, 8], SamplingConfig(cfg.temperature, cfg.top_p, seed), max_new_tokens=4)
        counts[s.step().committed_ids[0]] += 1
    return counts


@pytest.mark.parametrize("cfg", [SamplingConfig(1.0, 1.0), SamplingConfig(0.7, 0.9)])
def test_sampling_is_lossless(cfg):
    lm = tiny_lm("llama", seed=0)
    assert chi2_pvalue(first_token_counts(lm, cfg, 800), exact_first_token(lm, cfg)) > P_OK


def test_the_same_check_rejects_a_sampler_without_the_residual(monkeypatch):
    monkeypatch.setattr(core.specbound.method, "verify_chain_sampling", broken_verify)
    lm, cfg = tiny_lm("llama", seed=0), SamplingConfig(1.0, 1.0)
    assert chi2_pvalue(first_token_counts(lm, cfg, 800), exact_first_token(lm, cfg)) < P_BROKEN


def test_trace_records_the_step(target, heldout_prompts):
    s = Session(target, build_specbound_method(), heldout_prompts[0], max_new_tokens=16)
    t = s.step()
    L = target.num_layers
    assert t.method == "specbound" and t.target_forwards == 1
    assert t.tau == t.accepted + 1 == len(t.committed_ids)
    assert [n.parent for n in t.nodes] == list(range(-1, len(t.nodes) - 1))
    assert len(t.exits) in (len(t.nodes), len(t.nodes) + 1) and t.draft_stop in ("d_max", "w_max", "eos", "length")
    for e in t.exits:
        assert len(e.layers) == len(e.raw_conf) == len(e.annealed_conf) == len(e.temperature) == len(e.top_texts)
    d = t.specbound
    assert d.heads == "paper" and d.num_layers == L and len(d.head_agreement) == L - 1  # the per-layer heads
    assert d.layers_computed == d.layers_draft + d.layers_verify
    assert d.layers_full_equivalent == t.tau * L
    assert t.delta == pytest.approx((d.layers_draft + d.head_evals * d.head_cost_layers) / L)
    # issue 46, item 4: what the step "saved" counts its exit checks in layers, as δ does
    assert d.head_evals > 0
    assert d.layers_equivalent == pytest.approx(d.layers_computed + d.head_evals * d.head_cost_layers)
    assert d.compute_saved == pytest.approx(1 - d.layers_equivalent / d.layers_full_equivalent)
    # the final head's cost, measured in layers: the costed R counts it on both sides, and the verification's own
    # layers instead of a whole forward
    assert d.final_head_layers > 0
    assert d.layers_verify < L or d.verify_from_layer == 0
    ar, spent = layer_parts([t])
    assert ar == pytest.approx(t.tau * (L + d.final_head_layers))
    assert spent == pytest.approx(d.layers_equivalent + d.final_head_layers)
    assert curve_r([t], None) == pytest.approx(ar / spent)  # SpecBound needs no cost curve: its trace has its costs


def test_exit_checks_only_at_the_exit_layers(tiny6):
    method = build_specbound_method(alpha=0.0, tau_exit=0.0, d_max=5, min_exit_layer=1, exit_layers="3,5",
                                     record_raw=False)
    t = Session(tiny6, method, [5, 17, 33, 8], max_new_tokens=8).step()
    assert all(set(e.layers) <= {3, 5} for e in t.exits) and t.exits[0].exit_layer == 3
    assert all(math.isnan(r) for e in t.exits for r in e.raw_conf)  # not computed when no view needs it


def test_an_exit_vocabulary_scores_only_its_tokens(target):
    heads = heads_for(target)
    vocab = exit_vocab(target, 512)
    assert vocab is not None and len(vocab) == 512 and bool((vocab[1:] > vocab[:-1]).all())
    h = torch.randn(3, target.config.hidden_size)
    full, sub = heads.logits(target, 2, h), heads.logits(target, 2, h, vocab)  # (3, V) each
    inside = torch.zeros(target.config.vocab_size, dtype=torch.bool)
    inside[vocab] = True
    assert torch.allclose(sub[:, inside], full[:, inside], atol=1e-4)
    assert bool(torch.isinf(sub[:, ~inside]).all())  # a token outside cannot exit early
    assert torch.equal(heads.logits(target, target.num_layers, h, vocab), target.head(h))  # layer L: whole
    s = Session(target, build_specbound_method(exit_vocab=512, tau_exit=0.05), "def f(x):", max_new_tokens=24)
    for _ in range(4):
        t = s.step()
        assert all(inside[n.token_id] for n, e in zip(t.nodes, t.exits) if e.exit_layer is not None
                   and e.exit_layer < target.num_layers)
    assert exit_vocab(target, 0) is None and exit_vocab(target, 10 ** 6) is None


def test_checks_happen_at_d_max_and_at_the_chosen_layers_below_it(target):
    """paper (the default): every layer from the first; fast: the set stored with the heads (measured by
    cli.tune_specbound --choose-exit-layers) from ℓ_min = 2; any set: plus d_max, always."""
    heads = heads_for(target)
    stored = json.loads((heads_dir(target.name) / "layer_heads.json").read_text())["exit_layers"]
    assert heads.exit_layers == tuple(stored)
    settings = {"paper": {}, "fast": {"preset": "fast"}, "2;3": {"exit_layers": "2;3"},
                "fast, d_max 6": {"preset": "fast", "d_max": 6}, "stored, d_max 2": {"exit_layers": "stored", "d_max": 2}}
    checked = {label: Session(target, build_specbound_method(**given, record_raw=False), "def add(a, b):",
                              max_new_tokens=4).step().specbound.exit_layers for label, given in settings.items()}
    assert checked["paper"] == [1, 2, 3, 4, 5, 6]  # d_max = 6
    assert checked["fast"] == sorted({ell for ell in stored if 2 <= ell < 4} | {4})
    assert checked["2;3"] == [2, 3, 6]  # the default d_max = 6
    assert checked["fast, d_max 6"] == sorted({ell for ell in stored if 2 <= ell < 6} | {6})
    assert checked["stored, d_max 2"] == [2]


def test_choosing_exit_layers_over_repeated_passes_stores_the_choice_and_its_passes(tmp_path, capsys):
    from cli.tune_specbound import main as tune
    model = tmp_path / "target"
    shutil.copytree(Path(__file__).resolve().parent.parent / "assets" / "models" / "target", model)
    tune(["--model", str(model), "--n", "1", "--max-new-tokens", "6", "--choose-exit-layers", "--repeat", "2"])
    stored = json.loads((model / "exit_heads.json").read_text())
    measured = stored["exit_layers_measured"]
    assert measured["repeat"] == 2 and set(measured["speedup_over_ar"]) == {"2", "3", "4", "all"}
    best = max(measured["speedup_over_ar"], key=measured["speedup_over_ar"].get)
    assert stored["exit_layers"] == (list(range(1, 13)) if best == "all" else [int(best)])
    assert "2 pass(es)" in capsys.readouterr().out


def test_every_state_drafting_keeps_is_the_plain_forwards(tiny6):
    """Tokens exit at different depths, and a deeper one carries the shallower ones before it along: every state
    drafting kept (what the checks saw, what verification starts from) equals a plain forward's over the same
    tokens, and the depths are non-increasing along the block."""
    from core.specbound.block import Block
    from core.specbound.draft import draft_block
    heads = ScriptedHeads(6, [None])
    method = SpecBoundMethod(min_exit_layer=1, d_max=5, w_max=7, alpha=0.0, tau_exit=0.9, heads=heads)
    s = Session(tiny6, method, [5, 17, 33, 8], max_new_tokens=32)
    s.step()  # prefill, then a step that drafts nothing: the next block starts from a pending token
    heads.plan, heads.token = [5, 1, 4, 2, 1, 3, 1], -1
    block = Block.start(s.tcache.length, s.pending(s.tcache))
    with torch.inference_mode():
        draft_block(tiny6, s.tcache, method.plan(s), block, s.sampling, s.gen, s.text_of)
    ids = s.ids[:block.base] + block.tokens
    full = tiny6.forward(ids, list(range(len(ids))), tiny6.new_cache(64), return_hidden=True).hidden  # L + 1 of (T, d)
    assert block.depth == sorted(block.depth, reverse=True) and block.joined > 0
    assert [e.exit_layer for e in block.exits] == [5, 1, 4, 2, 1, 3, 1] and block.stop == "w_max"
    assert block.depth == [5, 4, 4, 3, 3, 3, 1, 0]  # the deepest exit at or after each token; the last never fed
    for j, states in enumerate(block.hidden):
        assert len(states) == (block.depth[j] + 1 if block.depth[j] else 0)
        for ell, h in enumerate(states):
            torch.testing.assert_close(h, full[ell][block.base + j], rtol=1e-5, atol=1e-5)