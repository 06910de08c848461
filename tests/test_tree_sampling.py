import pytest
"""Tree sampling is lossless: the first two committed tokens follow p(x1)·p(x2 | x1) exactly,
and the same check rejects a lossy 'typical acceptance' shortcut."""
import numpy as np

from core.drafters.draft_lm import ModelDrafter
from core.engine import Session
from core.methods import build_method
from core.sampling import SamplingConfig, draw, probs
import core.trees.method
from core.verify import TreeVerdict
from tests.test_sampling_lossless import P_BROKEN, P_OK, chi2_pvalue
from tests.tiny_models import tiny_lm

V = 10
PROMPT = [3, 7, 2, 5]
EOS = 1  # the tiny tokenizer's </s>: a first token of EOS ends the run (column V = "no second token")


def models():
    return tiny_lm("llama", seed=0, vocab_size=V), tiny_lm("llama", seed=5, vocab_size=V, num_hidden_layers=1)


def exact_joint(target, cfg) -> np.ndarray:
    p1 = probs(target.forward(PROMPT, range(4), target.new_cache()).logits[-1], cfg)
    joint = np.zeros((V, V + 1))
    joint[EOS, V] = p1[EOS]
    for x1 in set(range(V)) - {EOS}:
        p2 = probs(target.forward(PROMPT + [x1], range(5), target.new_cache()).logits[-1], cfg)
        joint[x1, :V] = (p1[x1] * p2).numpy()
    return joint


def sampled_joint(target, draft, cfg_base, runs) -> np.ndarray:
    counts = np.zeros((V, V + 1))
    for seed in range(runs):
        cfg = SamplingConfig(cfg_base.temperature, cfg_base.top_p, seed)
        s = Session(target, build_method("talon", N=6, K=3, mu=0.1), PROMPT, cfg, max_new_tokens=2, draft=ModelDrafter(draft))
        while not s.done:
            s.step()
        out = s.output_ids + [V]
        counts[out[0], out[1]] += 1
    return counts


def typical_acceptance(children, logits, p, greedy, gen):
    """Lossy: take the most likely drafted child whenever the target gives it probability > 0.1."""
    at, path, choices = -1, [], []
    while True:
        kids = children.get(at, {})
        good = [(float(p[at + 1, tok]), tok) for tok in kids if float(p[at + 1, tok]) > 0.1]
        x = max(good)[1] if good else draw(p[at + 1], gen)
        choices.append((at, x, float(p[at + 1, x])))
        if x not in kids:
            return TreeVerdict(path, choices)
        path.append(kids[x])
        at = kids[x]


@pytest.mark.slow
def test_tree_sampling_reproduces_the_target_joint():
    target, draft = models()
    cfg = SamplingConfig(1.0, 0.95)
    assert chi2_pvalue(sampled_joint(target, draft, cfg, 2500).ravel(), exact_joint(target, cfg).ravel()) > P_OK


@pytest.mark.slow
def test_the_check_rejects_a_lossy_acceptance_rule(monkeypatch):
    monkeypatch.setattr(core.trees.method, "verify_tree", typical_acceptance)
    target, draft = models()
    cfg = SamplingConfig(1.0, 0.95)
    assert chi2_pvalue(sampled_joint(target, draft, cfg, 2500).ravel(), exact_joint(target, cfg).ravel()) < P_BROKEN
