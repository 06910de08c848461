"""The stacked-projection forward (core/model/fused_layer.py) gives bit-identical logits and caches to the seven separate
products of the HF modules, shares their storage, and follows a weight that is replaced."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from core.model.causal_lm import CausalLM, causal_mask
from core.model.fused_layer import rotate_half
from tests.tiny_models import FAMILIES, char_tokenizer, tiny_hf, tiny_lm


def unfused_forward(lm: CausalLM, tokens: list[int], start: int, cache) -> torch.Tensor:
    """The forward as it ran before stacking: every HF module called on its own (the reference)."""
    T = len(tokens)
    positions = torch.arange(start, start + T)
    mask = causal_mask(start, T, lm.device)
    h = lm.embed(torch.tensor(tokens))
    cos, sin = lm.rope(positions, h)
    for i, layer in enumerate(lm.layers):
        attn = layer.self_attn
        x = layer.input_layernorm(h)
        q = attn.q_proj(x).view(T, lm.n_heads, lm.head_dim)
        k = attn.k_proj(x).view(T, lm.n_kv_heads, lm.head_dim)
        if hasattr(attn, "q_norm"):
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = q.transpose(0, 1), k.transpose(0, 1)
        v = attn.v_proj(x).view(T, lm.n_kv_heads, lm.head_dim).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        cache.write(i, start, k, v)
        keys, values = cache.view(i, start + T)
        m = lm.fused(i).windowed(mask, positions, start)
        out = F.scaled_dot_product_attention(q[None], keys[None], values[None], attn_mask=m[None, None],
                                             scale=attn.scaling, enable_gqa=lm.n_heads != lm.n_kv_heads)
        h = h + attn.o_proj(out[0].transpose(0, 1).reshape(T, -1))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    cache.length = start + T
    return lm.head(h)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_stacked_products_are_bit_identical_to_separate_ones(family):
    lm = tiny_lm(family)
    ids = torch.randint(2, 64, (24,), generator=torch.Generator().manual_seed(4)).tolist()
    ours, ref = lm.new_cache(64), lm.new_cache(64)
    with torch.inference_mode():
        assert torch.equal(lm.forward(ids[:12], range(12), ours).logits, unfused_forward(lm, ids[:12], 0, ref))
        for n in (1, 3, 7):  # one token, a short block, a tree-sized verification after the prefix
            a = lm.forward(ids[12:12 + n], range(12, 12 + n), ours, start=12).logits
            b = unfused_forward(lm, ids[12:12 + n], 12, ref)
            assert torch.equal(a, b), (family, n)
            assert torch.equal(ours.k[:, :, :12 + n], ref.k[:, :, :12 + n])
            assert torch.equal(ours.v[:, :, :12 + n], ref.v[:, :, :12 + n])


def test_modules_share_the_stacked_storage():
    lm = tiny_lm("qwen2")  # q/k/v biases
    f, attn = lm.fused(0), lm.layers[0].self_attn
    assert attn.q_proj.weight.data_ptr() == f.qkv.w.data_ptr()
    assert attn.v_proj.weight.data_ptr() == f.qkv.w[f.n_q + f.n_kv:].data_ptr()
    assert attn.k_proj.bias.data_ptr() == f.qkv.b[f.n_q:].data_ptr()
    assert lm.layers[0].mlp.up_proj.weight.data_ptr() == f.gate_up.w[f.inner:].data_ptr()
    with torch.no_grad():  # an in-place edit of a module's weight is the stacked tensor's
        attn.q_proj.weight.mul_(2.0)
    assert torch.equal(f.qkv.w[: f.n_q], attn.q_proj.weight)


def test_a_replaced_weight_is_read_again():
    hf = tiny_hf("llama")
    lm = CausalLM(hf, char_tokenizer(), "tiny")
    ids = torch.arange(2, 12)
    with torch.no_grad():
        lm.layers[1].self_attn.q_proj.weight = nn.Parameter(torch.randn_like(lm.layers[1].self_attn.q_proj.weight))
        lm.layers[2].mlp.down_proj.weight = nn.Parameter(torch.randn_like(lm.layers[2].mlp.down_proj.weight))
        theirs = hf(input_ids=ids[None]).logits[0]
    ours = lm.forward(ids, torch.arange(10), lm.new_cache()).logits
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_half_precision_uses_the_familys_own_norm():
    lm = CausalLM(tiny_hf("llama").to(torch.bfloat16), char_tokenizer(), "tiny-bf16")
    ids = torch.arange(2, 14)
    ours = lm.forward(ids, torch.arange(12), lm.new_cache()).logits
    with torch.no_grad():
        theirs = lm.hf(input_ids=ids[None]).logits[0].float()
    torch.testing.assert_close(ours, theirs, atol=0.1, rtol=0.05)



def test_a_bf16_model_on_a_cpu_attends_in_fp32_and_stays_consistent_one_token_at_a_time():
    """bf16 keys and values widen to fp32 exactly; the cache holds them so, and decoding one token at a time
    reads the same logits as one pass over the whole context (to bf16's step), so AR and verification agree."""
    lm = CausalLM(tiny_hf("llama").to(torch.bfloat16), char_tokenizer(), "tiny-bf16")
    assert lm.cache_dtype == torch.float32 and lm.new_cache(16).k.dtype == torch.float32
    ids = torch.arange(2, 14)
    whole = lm.forward(ids, torch.arange(12), lm.new_cache(16)).logits  # (12, V)
    cache = lm.new_cache(16)
    steps = torch.cat([lm.forward(ids[t:t + 1], torch.tensor([t]), cache).logits for t in range(12)])
    torch.testing.assert_close(steps.float(), whole.float(), atol=0.1, rtol=0.02)
    assert CausalLM(tiny_hf("llama"), char_tokenizer(), "tiny").cache_dtype == torch.float32
