"""Every drafter behind one seam: greedy output equals AR for chain / static / TALON on each drafter,
published-layout EAGLE-3 heads load (safetensors and .bin) and refuse a mismatch in one line, and
sampling stays lossless with the new drafters (each check with its broken companion)."""
import numpy as np
import pytest
import torch

from core.ar import ARMethod
from core.drafters.draft_lm import ModelDrafter
from core.drafters.lookup import LookupDrafter
from core.drafters.lookup_mix import LookupMix
from core.eagle3.drafter import EagleDrafter
from core.eagle3.loading import HeadLoadError, load_head
from core.engine import Session
from core.methods import build_method
from core.sampling import SamplingConfig, draw, probs
import core.trees.method
from core.verify import TreeVerdict
from tests.test_sampling_lossless import P_BROKEN, P_OK, broken_verify, chi2_pvalue
from tests.tiny_heads import write_tiny_head
from tests.tiny_models import tiny_lm

TREES = [("chain γ=4", "chain", dict(gamma=4)), ("static N=12 K=3 D=3", "static", dict(N=12, K=3, depth=3)),
         ("talon N=16 K=4 μ=0.05", "talon", dict(N=16, K=4, mu=0.05))]


def head_of(target, folder, **kw):
    return load_head(write_tiny_head(target, folder, **kw), target.config.hidden_size, target.vocab_size,
                     target.device, target.dtype)


@pytest.mark.parametrize("kind,draft_vocab", [("safetensors", 48), ("bin", None)])
def test_a_tiny_published_head_loads_and_decodes_losslessly(tmp_path, kind, draft_vocab):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    head = head_of(target, tmp_path / "head", draft_vocab=draft_vocab, kind=kind)
    assert head.reduced == (draft_vocab is not None)
    for prompt in ([5, 17, 33, 8], [9, 9, 40, 2, 11, 30, 7]):
        ar = Session(target, ARMethod(), prompt, max_new_tokens=30).generate()
        for label, name, knobs in TREES:
            s = Session(target, build_method(name, **knobs), prompt, max_new_tokens=30,
                        draft=EagleDrafter(head, target))
            got = s.generate()
            assert got.output_ids == ar.output_ids, label
            assert all(t.drafter == "eagle3" for t in got.traces)


def test_a_head_of_another_width_is_refused_in_one_line(tmp_path):
    other = tiny_lm("llama", seed=0, hidden_size=48, num_attention_heads=4, num_hidden_layers=4)
    folder = write_tiny_head(other, tmp_path / "wide")
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    with pytest.raises(HeadLoadError) as err:
        load_head(folder, target.config.hidden_size, target.vocab_size, target.device, target.dtype)
    assert "hidden size 48" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("written,nested,taps", [([1, 2, 4], False, (1, 2, 4)),  # top level: hidden-state indices
                                                 ([1, 2, 3], True, (2, 3, 4)),  # eagle_config, first id 1: outputs
                                                 ([2, 3, 4], True, (2, 3, 4))])  # eagle_config, first id 2: inputs
def test_a_head_naming_its_feature_layers_reads_them_and_decodes_losslessly(tmp_path, written, nested, taps):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    folder = write_tiny_head(target, tmp_path / "taps", taps=written, nested=nested)
    head = load_head(folder, target.config.hidden_size, target.vocab_size, target.device, target.dtype, 4)
    drafter = EagleDrafter(head, target)
    assert drafter.taps == taps  # 4 = the last layer's output
    assert EagleDrafter(head_of(target, tmp_path / "default"), target).taps == (2, 2, 1)  # 2, L//2, L-3
    prompt = [5, 17, 33, 8, 21]
    ar = Session(target, ARMethod(), prompt, max_new_tokens=30).generate()
    for label, name, knobs in TREES:
        got = Session(target, build_method(name, **knobs), prompt, max_new_tokens=30,
                      draft=EagleDrafter(head, target)).generate()
        assert got.output_ids == ar.output_ids, label


def test_a_head_reading_deeper_than_the_target_is_refused_in_one_line(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    folder = write_tiny_head(target, tmp_path / "deep", taps=[2, 4, 9])
    with pytest.raises(HeadLoadError) as err:
        load_head(folder, target.config.hidden_size, target.vocab_size, target.device, target.dtype, 4)
    assert "4-layer target" in str(err.value) and "0..4" in str(err.value) and "\n" not in str(err.value)


def test_a_bin_with_code_in_it_is_refused(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    folder = write_tiny_head(target, tmp_path / "evil", kind="bin")
    torch.save({"fc.weight": torch.zeros(1), "x": ARMethod()}, folder / "pytorch_model.bin")
    with pytest.raises(HeadLoadError, match="not a plain tensor file"):
        load_head(folder, target.config.hidden_size, target.vocab_size, target.device, target.dtype)


def test_lookup_proposes_what_followed_the_longest_matching_suffix():
    d = LookupDrafter(vocab_size=10, max_ngram=2)
    d.prefill([], None, 0)
    d.begin([1, 2, 3, 1, 2, 4, 1, 2])
    from core.draft_tree import DraftTree
    q = torch.softmax(d.propose([-1], DraftTree()), -1)[0]
    assert q[3] == pytest.approx(0.5) and q[4] == pytest.approx(0.5)  # "1 2" was followed by 3 and by 4


@pytest.mark.slow
@pytest.mark.parametrize("drafter", ["lookup", "model"])
def test_greedy_methods_equal_ar_on_every_drafter_of_the_embedded_pair(target, draft, heldout_prompts, drafter,
                                                                        ar_reference):
    for prompt in heldout_prompts[:6]:
        _, ar_ids = ar_reference(target, prompt, 24)
        for label, name, knobs in TREES:
            d = ModelDrafter(draft) if drafter == "model" else LookupDrafter(target.vocab_size)
            got = Session(target, build_method(name, **knobs), prompt, max_new_tokens=24, draft=d).generate()
            assert got.output_ids == ar_ids, f"{drafter} {label}"


V = 10
PROMPT = [3, 7, 2, 5, 3, 7, 2, 5, 3]  # repeats, so prompt lookup has something to propose
EOS = 1
METHODS = {"talon": dict(N=6, K=3, mu=0.1), "chain": dict(gamma=3)}


def exact_joint(target, cfg) -> np.ndarray:
    """p(x1) p(x2 | x1) over the tiny vocabulary; column V: no second token (x1 was EOS)."""
    n = len(PROMPT)
    p1 = probs(target.forward(PROMPT, range(n), target.new_cache()).logits[-1], cfg)
    joint = np.zeros((V, V + 1))
    joint[EOS, V] = p1[EOS]
    for x1 in set(range(V)) - {EOS}:
        p2 = probs(target.forward(PROMPT + [x1], range(n + 1), target.new_cache()).logits[-1], cfg)
        joint[x1, :V] = (p1[x1] * p2).numpy()
    return joint


def sampled_joint(target, make_drafter, method, runs):
    counts = np.zeros((V, V + 1))
    for seed in range(runs):
        s = Session(target, build_method(method, **METHODS[method]), PROMPT, SamplingConfig(1.0, 0.95, seed),
                    max_new_tokens=2, draft=make_drafter())
        while not s.done:
            s.step()
        out = s.output_ids + [V]
        counts[out[0], out[1]] += 1
    return counts


def sampling_setup(tmp_path, drafter):
    target = tiny_lm("llama", seed=0, vocab_size=V, num_hidden_layers=4)
    if drafter.startswith("eagle3"):
        head = head_of(target, tmp_path / "h", draft_vocab=8)
        if drafter.endswith("mix"):  # prompt lookup mixed in: q changes where an n-gram matched (most rows here)
            return target, lambda: LookupMix(EagleDrafter(head, target, "off"), V, 0.5)
        return target, lambda: EagleDrafter(head, target, "on" if drafter.endswith("int8") else "off")
    return target, lambda: LookupDrafter(V)


@pytest.mark.parametrize("drafter,method", [("eagle3", "talon"), ("eagle3", "chain"), ("lookup", "talon"),
                                            ("lookup", "chain"), ("eagle3-int8", "chain"), ("eagle3-mix", "chain"),
                                            ("eagle3-mix", "talon")])
@pytest.mark.slow
def test_sampling_on_new_drafters_reproduces_the_target_joint(tmp_path, drafter, method):
    target, make = sampling_setup(tmp_path, drafter)
    counts = sampled_joint(target, make, method, 2000)
    assert chi2_pvalue(counts.ravel(), exact_joint(target, SamplingConfig(1.0, 0.95)).ravel()) > P_OK


def drafted_first(children, logits, p, greedy, gen):
    """Lossy: descend into the drafted child the target likes best whenever there is one."""
    at, path, choices = -1, [], []
    while True:
        kids = children.get(at, {})
        x = max(kids, key=lambda tok: float(p[at + 1, tok])) if kids else draw(p[at + 1], gen)
        choices.append((at, x, float(p[at + 1, x])))
        if x not in kids:
            return TreeVerdict(path, choices)
        path.append(kids[x])
        at = kids[x]


BROKEN = {"talon": ("verify_tree", drafted_first),  # a lossy tree walk
          "chain": ("verify_chain_sampling", broken_verify)}  # a chain without the residual


@pytest.mark.slow
@pytest.mark.parametrize("method", ["talon", "chain"])
@pytest.mark.parametrize("drafter", ["eagle3", "lookup"])
def test_the_same_check_rejects_a_broken_verifier_on_new_drafters(tmp_path, monkeypatch, drafter, method):
    monkeypatch.setattr(core.trees.method, *BROKEN[method])
    target, make = sampling_setup(tmp_path, drafter)
    counts = sampled_joint(target, make, method, 2000)
    assert chi2_pvalue(counts.ravel(), exact_joint(target, SamplingConfig(1.0, 0.95)).ravel()) < P_BROKEN
