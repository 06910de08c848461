"""The self drafter: the target drafts with its own first ℓ layers; the verification reuses them and stays exact."""
import pytest
import torch

from cli.generate import main as generate_main
from core.draft_tree import DraftTree, tree_attention_mask, tree_positions
from core.drafter_registry import drafter_factory
from core.drafters.self_drafter import SelfDrafter, check_self_layer
from core.drafters.shallow_verify import verify_with_shallow
from core.engine import Session
from core.methods import build_method
from core.model.exit_heads import heads_for, logit_lens
from core.model.layer_heads import LayerHeads
from core.sampling import SamplingConfig
from core.trace import ROOT
import core.trees.method
from tests.test_drafters import BROKEN, V, exact_joint, sampled_joint
from tests.test_sampling_lossless import P_BROKEN, P_OK, chi2_pvalue
from tests.tiny_models import tiny_lm

TREES = [("talon embedded", "talon", dict(preset="embedded")), ("talon paper", "talon", dict(N=24, K=4, mu=0.03)),
         ("chain", "chain", dict(gamma=4)), ("static", "static", dict(N=10, K=3, depth=3))]


@pytest.mark.parametrize("layer", [1, 4, 11])
def test_greedy_trees_on_the_self_drafter_equal_ar(target, heldout_prompts, ar_reference, layer):
    make = drafter_factory("self", target, options={"self_layer": layer})
    for prompt in heldout_prompts[:3]:
        _, ar_ids = ar_reference(target, prompt, 24)
        for label, name, knobs in TREES:
            got = Session(target, build_method(name, **knobs), prompt, max_new_tokens=24, draft=make()).generate()
            assert got.output_ids == ar_ids, f"ℓ_self={layer} {label}"


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "mistral"])
def test_any_model_drafts_itself_through_its_logit_lens(family):
    """No trained heads, no head of its own: the model's final norm + LM head after layer ℓ."""
    lm = tiny_lm(family, seed=1, num_hidden_layers=4)
    prompt = [4, 9, 13, 2, 7, 4, 9]
    ar = Session(lm, build_method("ar"), prompt, max_new_tokens=20).generate().output_ids
    for name, knobs in (("talon", dict(N=8, K=2, mu=0.1)), ("chain", dict(gamma=3))):
        s = Session(lm, build_method(name, **knobs), prompt, max_new_tokens=20, draft=SelfDrafter(lm, logit_lens(lm), 2))
        assert s.generate().output_ids == ar, f"{family} {name}"


def random_tree(n: int, seed: int) -> DraftTree:
    g = torch.Generator().manual_seed(seed)
    tree = DraftTree()
    for i in range(n):
        parent = ROOT if i < 2 else int(torch.randint(-1, i, (1,), generator=g))
        tree.add(int(torch.randint(2, 60, (1,), generator=g)), parent, 0.5, 0.5)
    return tree


def test_the_verification_reuses_the_shallow_layers_and_equals_a_plain_forward():
    lm = tiny_lm("llama", seed=2, num_hidden_layers=4)
    context = [5, 8, 3, 9, 11, 4]
    for seed in range(5):
        tree = random_tree(9, seed)
        d = SelfDrafter(lm, logit_lens(lm), 2)
        d.prefill(context, None, 64)
        d.begin(context)
        d.propose([ROOT], tree)
        fed_nodes = sorted({p for p in tree.parents if p != ROOT})  # nodes with children were expanded
        by_depth = sorted(fed_nodes, key=lambda i: tree.depths[i])
        for depth in sorted({tree.depths[i] for i in by_depth}):
            d.propose([i for i in by_depth if tree.depths[i] == depth], tree)
        base, P = len(context) - 1, 1
        shallow = d.shallow(base, list(range(len(tree))))
        assert shallow.rows == [0] + [P + i for i in fed_nodes]
        mask = tree_attention_mask(tree.parents, base, P, lm.device)
        positions = list(range(base, base + P)) + tree_positions(tree.depths, base + P)
        tokens = context[-1:] + tree.tokens
        cache = lm.new_cache(64)
        lm.forward(context[:-1], range(base), cache)
        plain = lm.forward(tokens, positions, cache, mask=mask).logits
        cache.rollback(base)
        reused = verify_with_shallow(lm, tokens, positions, cache, base, mask, shallow)
        torch.testing.assert_close(reused.logits, plain, atol=1e-4, rtol=1e-4)
        assert reused.fed_rows == 1 + len(fed_nodes)


def test_caches_after_self_drafted_steps_equal_running_the_committed_tokens():
    lm = tiny_lm("llama", seed=0, num_hidden_layers=4)
    s = Session(lm, build_method("talon", N=10, K=3, mu=0.05), [4, 9, 13, 2, 7], max_new_tokens=40,
                draft=SelfDrafter(lm, logit_lens(lm), 2))
    for _ in range(4):
        s.step()
    ref = lm.new_cache()
    n = s.tcache.length
    lm.forward(s.ids[:n], range(n), ref)
    torch.testing.assert_close(s.tcache.k[:, :, :n], ref.k[:, :, :n], atol=1e-5, rtol=1e-4)
    m = s.drafter.cache.length
    torch.testing.assert_close(s.drafter.cache.k[:, :, :m], ref.k[:2, :, :m], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("bad", ["0", "12", "2.5", "x"])
def test_a_bad_self_layer_is_refused_in_one_line(capsys, bad):
    with pytest.raises(SystemExit) as exc:
        generate_main(["--method", "talon", "--drafter", "self", "--self-layer", bad, "--prompts",
                       "assets/prompts/heldout.jsonl", "--max-new-tokens", "4"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("1 to L − 1 = 11" in err or "invalid float value" in err), err


def test_check_self_layer_names_the_range():
    assert check_self_layer(3.0, 12) == 3
    for bad in (0, 12, 2.5, True, None, "three"):
        with pytest.raises(ValueError, match="from 1 to L − 1 = 11"):
            check_self_layer(bad, 12)


def test_the_embedded_target_drafts_through_its_per_layer_heads(target):
    heads = heads_for(target)
    assert isinstance(heads, LayerHeads)
    d = drafter_factory("self", target, options={"self_layer": 3})()
    assert d.heads is heads and d.identity.endswith(":3:paper")


def sampling_target():
    """Seed 1: seed 0's lens after layer 2 is so close to its last layer that a chain without the residual is
    off by little (p ≈ 1e-5 after 2000 draws, against 2e-9 here), too little for the broken check's 1e-6."""
    return tiny_lm("llama", seed=1, vocab_size=V, num_hidden_layers=4)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["talon", "chain"])
def test_sampling_on_the_self_drafter_reproduces_the_target_joint(method):
    target = sampling_target()
    counts = sampled_joint(target, lambda: SelfDrafter(target, logit_lens(target), 2), method, 2000)
    assert chi2_pvalue(counts.ravel(), exact_joint(target, SamplingConfig(1.0, 0.95)).ravel()) > P_OK


@pytest.mark.slow
@pytest.mark.parametrize("method", ["talon", "chain"])
def test_the_same_check_rejects_a_broken_verifier_on_the_self_drafter(monkeypatch, method):
    monkeypatch.setattr(core.trees.method, *BROKEN[method])
    target = sampling_target()
    counts = sampled_joint(target, lambda: SelfDrafter(target, logit_lens(target), 2), method, 2000)
    assert chi2_pvalue(counts.ravel(), exact_joint(target, SamplingConfig(1.0, 0.95)).ravel()) < P_BROKEN

