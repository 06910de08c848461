"""Drafting with an EAGLE-3 head's stacked products (core/eagle3/fused_head.py) and over its own draft vocabulary
(ColumnQ): the same states as the head's modules, the same trees as over the whole vocabulary, and every tree
method still equal to AR."""
import pytest
import torch

from core.ar import ARMethod
from core.draft_tree import DraftTree
from core.drafters.contract import widen
from core.eagle3.drafter import EagleDrafter
from core.eagle3.fused_head import fused_head, fusable
from core.engine import Session
from core.model.causal_lm import CausalLM
from core.methods import build_method
from core.trace import ROOT
from core.trees.policies import ColumnQ, StaticPolicy, TalonPolicy
from tests.test_drafters import TREES, head_of
from tests.tiny_models import char_tokenizer, tiny_hf, tiny_lm


def _layer_inputs(target, T: int = 3, S0: int = 9):
    c = target.config
    torch.manual_seed(1)
    emb, state = torch.randn(T, c.hidden_size, dtype=target.dtype), torch.randn(T, c.hidden_size, dtype=target.dtype)
    hd = c.hidden_size // c.num_attention_heads
    keys = torch.randn(c.num_key_value_heads, S0 + T, hd, dtype=target.cache_dtype)
    values = torch.randn_like(keys)
    mask = torch.ones(T, S0 + T, dtype=torch.bool).tril(S0)  # the context, then a causal chain of T

    def kv(i, k, v):  # k, v (nkv, T, D) written after the context
        K, V = keys.clone(), values.clone()
        K[:, S0:], V[:, S0:] = k, v
        return K, V
    return emb, state, torch.arange(S0, S0 + T), kv, mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_stacked_products_give_the_modules_states_bit_for_bit(tmp_path, dtype):
    target = CausalLM(tiny_hf("llama", num_hidden_layers=4).to(dtype), char_tokenizer(), f"tiny-{dtype}")
    head = head_of(target, tmp_path / "head", draft_vocab=48)
    assert fusable(head)
    emb, state, positions, kv, mask = _layer_inputs(target)
    with torch.inference_mode():
        fused = fused_head(head, target.plan).forward(head, emb, state, positions, kv, mask)
        modules = head(emb[None], state[None], positions[None],
                       lambda i, k, v: tuple(t[None] for t in kv(i, k[0], v[0])), mask)[0]
    assert torch.equal(fused, modules)


def test_the_stacked_copies_follow_the_heads_weights(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    head = head_of(target, tmp_path / "head")
    first = fused_head(head, target.plan)
    assert fused_head(head, target.plan) is first  # made once per weights ...
    with torch.no_grad():
        head.midlayer.mlp.down_proj.weight.mul_(2)
    assert fused_head(head, target.plan) is not first  # ... and again when they change


def test_a_head_with_variants_keeps_its_modules(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    head = head_of(target, tmp_path / "head")
    head.config.biases = ("q_proj",)
    assert not fusable(head) and fused_head(head, target.plan) is None


def test_a_reduced_head_proposes_over_its_own_ids_and_the_trees_match_the_whole_vocabulary(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    head = head_of(target, tmp_path / "head", draft_vocab=48)
    d = EagleDrafter(head, target)
    assert d.columns is not None and len(d.columns) == 48
    ids = [5, 17, 33, 8, 9, 40]
    with torch.inference_mode():
        feats = target.forward(ids[:-1], range(len(ids) - 1), target.new_cache(64), taps=d.taps).taps
        d.prefill(ids, feats, 64)
        d.begin(ids)
        z = d.propose([ROOT], DraftTree())  # (1, 48)
    assert z.shape == (1, 48)
    q = torch.softmax(z, -1)
    full = torch.softmax(widen(z, d.columns, target.vocab_size), -1)  # (1, V): 0 outside the columns
    torch.testing.assert_close(full[0, d.columns], q[0], rtol=1e-6, atol=0)  # the sums differ in their last bits
    for policy in (TalonPolicy(N=6, K=3, mu=0.1, k_init=1), StaticPolicy(N=6, K=3, depth=1)):
        trees = [policy.grow(lambda f, t, dist=dist: dist, max_depth=1).tree for dist in
                 (ColumnQ(q, d.columns), full)]
        assert trees[0].tokens == trees[1].tokens and trees[0].parents == trees[1].parents


def test_every_tree_method_on_a_reduced_head_still_equals_ar(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    head = head_of(target, tmp_path / "head", draft_vocab=48)
    prompt = [9, 9, 40, 2, 11, 30, 7]
    ar = Session(target, ARMethod(), prompt, max_new_tokens=30).generate()
    for _, name, knobs in TREES:
        got = Session(target, build_method(name, **knobs), prompt, max_new_tokens=30,
                      draft=EagleDrafter(head, target)).generate()
        assert got.output_ids == ar.output_ids, name
