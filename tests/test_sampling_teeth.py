"""Sampling checks that bite: each broken companion below is a bug the lossless tests must catch.

- a draw the target gives probability 0 fails the chi-square check outright (chi2_pvalue);
- a sampler that forgets top-p (chain, tree, SpecBound) is rejected;
- trees are sampled deeper than depth 0 (several steps, a joint over the positions they draft), and a walk
  that is right at the root but mis-samples below it is rejected;
- the same seed gives the same text: tree verification draws every committed token from p with the
  session's generator, one draw per token, as AR does, so a sampled static / TALON / auto run reproduces
  sampled AR token for token on every drafter. Chains are exempt: their rejection rule spends uniforms on
  each drafted token and draws bonus tokens from the residual max(0, p − q), so the same seed gives another
  (equally distributed) text.
"""
import dataclasses
import itertools

import numpy as np
import pytest
import torch

from core.ar import ARMethod
from core.drafter_registry import drafter_factory
from core.drafters.draft_lm import ModelDrafter
from core.drafters.lookup import LookupDrafter
from core.drafters.self_drafter import SelfDrafter
from core.eagle3.drafter import EagleDrafter
from core.eagle3.loading import load_head
from core.engine import Session
from core.methods import build_method
from core.model.exit_heads import logit_lens
from core.sampling import SamplingConfig, draw, probs
import core.specbound.method
import core.trees.method
from core.verify import TreeVerdict
from tests import test_specbound, test_tree_sampling
from tests.test_sampling_lossless import P_BROKEN, P_OK, chi2_pvalue, exact_first_token, first_token_counts
from tests.tiny_heads import write_tiny_head
from tests.tiny_models import tiny_lm


def ignoring_top_p(logits: torch.Tensor, cfg: SamplingConfig) -> torch.Tensor:
    """The broken companion: the distribution with the temperature applied but top-p forgotten."""
    return probs(logits, dataclasses.replace(cfg, top_p=1.0))


def test_a_draw_the_target_gives_probability_zero_fails_the_check():
    expected = np.array([0.5, 0.3, 0.2, 0.0])
    assert chi2_pvalue(np.array([500, 300, 200, 0]), expected) > P_OK
    assert chi2_pvalue(np.array([500, 300, 199, 1]), expected) == 0.0  # one impossible draw is enough


def test_a_chain_that_ignores_top_p_is_rejected(monkeypatch):
    cfg = SamplingConfig(0.7, 0.9)
    target, draft = tiny_lm("llama", seed=0), tiny_lm("llama", seed=7, num_hidden_layers=1)
    monkeypatch.setattr(core.trees.method, "probs", ignoring_top_p)
    assert chi2_pvalue(first_token_counts(target, draft, cfg, runs=300), exact_first_token(target, cfg)) < P_BROKEN


def test_a_tree_verifier_that_ignores_top_p_is_rejected(monkeypatch):
    target, draft = test_tree_sampling.models()
    cfg = SamplingConfig(1.0, 0.95)
    monkeypatch.setattr(core.trees.method, "probs", ignoring_top_p)
    counts = test_tree_sampling.sampled_joint(target, draft, cfg, 400)
    assert chi2_pvalue(counts.ravel(), test_tree_sampling.exact_joint(target, cfg).ravel()) < P_BROKEN


def test_specbound_ignoring_top_p_is_rejected(monkeypatch):
    lm, cfg = tiny_lm("llama", seed=0), SamplingConfig(0.7, 0.9)
    monkeypatch.setattr(core.specbound.method, "probs", ignoring_top_p)
    counts = test_specbound.first_token_counts(lm, cfg, 300)
    assert chi2_pvalue(counts, exact_first_token(lm, cfg)) < P_BROKEN


# Deep trees: the first three tokens of a run whose trees are drafted by the target itself (q = p, so the walk
# often descends to depth 1 and 2), over a small vocabulary so the joint has few cells.
V = 8
EOS = 1
PROMPT = [3, 7, 2, 5]
DEEP = dict(N=12, K=3, mu=0.05)
DEEP_CFG = SamplingConfig(1.0, 0.95)


def deep_target():
    return tiny_lm("llama", seed=0, vocab_size=V)


def exact_joint3(target, cfg: SamplingConfig) -> np.ndarray:
    """p(x1) p(x2 | x1) p(x3 | x1 x2); index V: no token there (the text ended at EOS)."""
    def p_next(ids):
        return probs(target.forward(ids, range(len(ids)), target.new_cache()).logits[-1], cfg).double().numpy()
    joint = np.zeros((V + 1, V + 1, V + 1))
    p1 = p_next(PROMPT)
    for x1 in range(V):
        if x1 == EOS:
            joint[x1, V, V] = p1[x1]
            continue
        p2 = p_next(PROMPT + [x1])
        for x2 in range(V):
            if x2 == EOS:
                joint[x1, x2, V] = p1[x1] * p2[x2]
            else:
                joint[x1, x2, :V] = p1[x1] * p2[x2] * p_next(PROMPT + [x1, x2])
    return joint


def sampled_joint3(target, runs: int) -> tuple[np.ndarray, int]:
    """Counts of the first three tokens, and how many of them were accepted drafts below depth 0."""
    counts, deep = np.zeros((V + 1, V + 1, V + 1)), 0
    for seed in range(runs):
        cfg = dataclasses.replace(DEEP_CFG, seed=seed)
        s = Session(target, build_method("talon", **DEEP), PROMPT, cfg, max_new_tokens=3,
                    draft=ModelDrafter(target))
        while not s.done:
            t = s.step()
            deep += sum(t.nodes[i].depth >= 1 for i in t.accepted_path)
        out = (s.output_ids + [V, V])[:3]
        counts[tuple(out)] += 1
    return counts, deep


def right_at_the_root_only(children, logits, p, greedy, gen) -> TreeVerdict:
    """Broken below depth 0: a correct draw at the root, but at a drafted node it takes the drafted child the
    target likes best whenever there is one (typical acceptance), instead of a draw from p."""
    at, path, choices = -1, [], []
    while True:
        kids = children.get(at, {})
        if at == -1 or not kids:
            x = draw(p[at + 1], gen)
        else:
            x = max(kids, key=lambda tok: float(p[at + 1, tok]))
        choices.append((at, x, float(p[at + 1, x])))
        if x not in kids:
            return TreeVerdict(path, choices)
        path.append(kids[x])
        at = kids[x]


@pytest.mark.slow
def test_deep_tree_sampling_reproduces_the_joint_of_three_tokens():
    target = deep_target()
    counts, deep = sampled_joint3(target, 1500)
    assert deep > 250  # the walk really went below depth 0
    assert chi2_pvalue(counts.ravel(), exact_joint3(target, DEEP_CFG).ravel()) > P_OK


@pytest.mark.slow
def test_the_deep_check_rejects_a_walk_that_errs_only_below_depth_0(monkeypatch):
    monkeypatch.setattr(core.trees.method, "verify_tree", right_at_the_root_only)
    target = deep_target()
    counts, _ = sampled_joint3(target, 1500)
    assert chi2_pvalue(counts.ravel(), exact_joint3(target, DEEP_CFG).ravel()) < P_BROKEN


# Same seed, same text: static / TALON / auto on every drafter reproduce sampled AR token for token.
SAME_SEED_METHODS = {"static": dict(N=12, K=3, depth=3), "talon": dict(N=12, K=3, mu=0.05),
                     "talon auto": dict(N=16, K=2, mu=0.1, auto=1), "static auto": dict(N=16, K=2, depth=3, auto=1)}


@pytest.fixture(scope="module")
def same_seed_setup(tmp_path_factory):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    folder = write_tiny_head(target, tmp_path_factory.mktemp("head") / "h", draft_vocab=48)
    head = load_head(folder, target.config.hidden_size, target.vocab_size, target.device, target.dtype)
    draft = tiny_lm("llama", seed=7, num_hidden_layers=1)
    drafters = {"model": lambda: ModelDrafter(draft), "eagle3": lambda: EagleDrafter(head, target),
                "lookup": lambda: LookupDrafter(target.vocab_size), "self": lambda: SelfDrafter(target, logit_lens(target), 2)}
    return target, drafters


@pytest.mark.parametrize("drafter", ["model", "eagle3", "lookup", "self"])
def test_the_same_seed_gives_sampled_ar_text_on_every_tree_method(same_seed_setup, drafter):
    target, drafters = same_seed_setup
    prompts = ([5, 17, 33, 8], [9, 9, 40, 2, 11, 30, 7, 9, 9, 40])
    accepted = 0
    for prompt, (seed, cfg) in itertools.product(prompts, enumerate([(1.0, 1.0), (0.8, 0.9)])):
        sampling = SamplingConfig(*cfg, seed=seed)
        ar = Session(target, ARMethod(), prompt, sampling, max_new_tokens=24).generate().output_ids
        for label, knobs in SAME_SEED_METHODS.items():
            name = label.split()[0]
            got = Session(target, build_method(name, **knobs), prompt, sampling, max_new_tokens=24,
                          draft=drafters[drafter]()).generate()
            assert got.output_ids == ar, f"{label} on {drafter}, seed {seed}"
            accepted += sum(t.accepted for t in got.traces)
    assert accepted > 0 or drafter == "lookup"  # drafts were taken (random tiny text rarely repeats itself)


@pytest.mark.slow
@pytest.mark.parametrize("drafter", ["model", "eagle3", "lookup", "self"])
def test_the_same_seed_gives_sampled_ar_text_on_the_embedded_pair(target, heldout_prompts, drafter):
    make = drafter_factory(drafter, target)
    accepted = 0
    for seed, prompt in enumerate(heldout_prompts[:2]):
        sampling = SamplingConfig(0.7, 0.9, seed)
        ar = Session(target, ARMethod(), prompt, sampling, max_new_tokens=32).generate().output_ids
        for label, knobs in SAME_SEED_METHODS.items():
            got = Session(target, build_method(label.split()[0], **knobs), prompt, sampling, max_new_tokens=32,
                          draft=make()).generate()
            assert got.output_ids == ar, f"{label} on {drafter}, seed {seed}"
            accepted += sum(t.accepted for t in got.traces)
    assert accepted > 0
