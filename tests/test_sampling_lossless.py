"""Sampling is lossless: committed tokens follow the target's distribution exactly.

Each check comes with a deliberately broken variant (the bonus drawn from p instead of the
residual max(0, p - q)) that the same statistic must reject, so the check has teeth.
"""
import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from core.drafters.draft_lm import ModelDrafter
from core.engine import Session
from core.methods import build_method
from core.sampling import SamplingConfig, draw, probs, top_p_filter, uniform
import core.trees.method
from core.verify import ChainVerdict, verify_chain_sampling
from tests.tiny_models import tiny_lm

P_OK = 1e-3  # a correct sampler fails this by chance 1 time in 1000
P_BROKEN = 1e-6


def chi2_pvalue(counts: np.ndarray, expected_p: np.ndarray) -> float:
    """Chi-square goodness of fit, pooling cells whose expected count is below 5. A draw of an outcome the
    target gives probability 0 fails outright (p = 0): pooled away it would hide exactly what a lossy
    sampler adds (a token outside the top-p nucleus, say)."""
    if counts[expected_p <= 0].sum() > 0:
        return 0.0
    n = counts.sum()
    exp = expected_p * n
    big = exp >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(exp[big], exp[~big].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def broken_verify(drafted, q, p, gen):
    """Drops the residual: a rejected position resamples from p itself (biased towards q's misses)."""
    for i, x in enumerate(drafted):
        if uniform(gen, p.device) * q[i, x] >= p[i, x]:
            return ChainVerdict(i, draw(p[i], gen))
    return ChainVerdict(len(drafted), draw(p[len(drafted)], gen))


def table_chain_joint(verify, trials: int, seed: int = 0) -> np.ndarray:
    """Two-token joint frequencies from chain SD (γ = 2) on hand-made tables p(x1), p(x2 | x1) vs q."""
    g = torch.Generator().manual_seed(seed)
    V = 5
    p1 = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05])
    q1 = torch.tensor([0.05, 0.1, 0.15, 0.2, 0.5])
    p2 = torch.softmax(torch.randn(V, V, generator=torch.Generator().manual_seed(1)) * 1.5, -1)  # (V, V)
    q2 = torch.softmax(torch.randn(V, V, generator=torch.Generator().manual_seed(2)) * 1.5, -1)
    counts = np.zeros((V, V))
    for _ in range(trials):
        x1 = draw(q1, g)
        x2 = draw(q2[x1], g)
        p = torch.stack([p1, p2[x1], torch.full((V,), 1 / V)])
        v = verify([x1, x2], torch.stack([q1, q2[x1]]), p, g)
        first = [x1, x2][: v.accepted] + [v.bonus]
        if len(first) == 1:  # the step ended after one token: the next step's first token comes from p2
            first.append(draw(p2[first[0]], g))  # its own correctness is the same rule at position 1
        counts[first[0], first[1]] += 1
    expected = (p1[:, None] * p2).numpy()
    return counts, expected


def test_chain_verification_reproduces_the_target_joint_distribution():
    counts, expected = table_chain_joint(verify_chain_sampling, 12000)
    assert chi2_pvalue(counts.ravel(), expected.ravel()) > P_OK


def test_the_same_check_rejects_a_sampler_without_the_residual():
    counts, expected = table_chain_joint(broken_verify, 12000)
    assert chi2_pvalue(counts.ravel(), expected.ravel()) < P_BROKEN


def first_token_counts(target, draft, cfg_base: SamplingConfig, runs: int, gamma: int = 3) -> np.ndarray:
    prompt = [5, 17, 33, 8]
    counts = np.zeros(target.config.vocab_size)
    for seed in range(runs):
        cfg = SamplingConfig(cfg_base.temperature, cfg_base.top_p, seed)
        s = Session(target, build_method("chain", gamma=gamma), prompt, cfg, max_new_tokens=4, draft=ModelDrafter(draft))
        counts[s.step().committed_ids[0]] += 1
    return counts


def exact_first_token(target, cfg: SamplingConfig) -> np.ndarray:
    prompt = [5, 17, 33, 8]
    logits = target.forward(prompt, range(4), target.new_cache()).logits[-1]
    return probs(logits, cfg).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [SamplingConfig(1.0, 1.0), SamplingConfig(0.7, 0.9)])
def test_chain_sampling_end_to_end_matches_target(cfg):
    target, draft = tiny_lm("llama", seed=0), tiny_lm("llama", seed=7, num_hidden_layers=1)
    counts = first_token_counts(target, draft, cfg, runs=1500)
    assert chi2_pvalue(counts, exact_first_token(target, cfg)) > P_OK


@pytest.mark.slow
def test_end_to_end_check_rejects_the_broken_sampler(monkeypatch):
    monkeypatch.setattr(core.trees.method, "verify_chain_sampling", broken_verify)
    cfg = SamplingConfig(1.0, 1.0)
    target, draft = tiny_lm("llama", seed=0), tiny_lm("llama", seed=7, num_hidden_layers=1)
    counts = first_token_counts(target, draft, cfg, runs=1500)
    assert chi2_pvalue(counts, exact_first_token(target, cfg)) < P_BROKEN


def test_top_p_keeps_the_smallest_nucleus():
    p = torch.tensor([0.1, 0.4, 0.3, 0.2])
    kept = top_p_filter(p, 0.6)
    torch.testing.assert_close(kept, torch.tensor([0.0, 4 / 7, 3 / 7, 0.0]))
    torch.testing.assert_close(top_p_filter(p, 1.0), p)
