import pytest
import torch

from core.model.causal_lm import causal_mask
from core.model.kv_cache import KVCache
from tests.tiny_models import tiny_lm


def filled(n_slots: int) -> KVCache:
    c = KVCache(2, 1, 3, 16, torch.float32, torch.device("cpu"))
    for layer in range(2):
        vals = torch.arange(n_slots, dtype=torch.float32)[None, :, None].expand(1, n_slots, 3) + 100 * layer
        c.write(layer, 0, vals, -vals)
    c.length = n_slots
    return c


def test_rollback_moves_length_only():
    c = filled(8)
    before = c.k.clone()
    c.rollback(5)
    assert c.length == 5 and torch.equal(c.k, before)
    with pytest.raises(ValueError):
        c.rollback(17)


def test_compact_gathers_arbitrary_slots_in_order():
    c = filled(10)
    c.compact([7, 4, 9], start=3)
    assert c.length == 6
    assert c.k[0, 0, :6, 0].tolist() == [0, 1, 2, 7, 4, 9]
    assert c.v[1, 0, :6, 0].tolist() == [-100, -101, -102, -107, -104, -109]


def test_compact_with_overlapping_source_and_destination():
    c = filled(10)
    c.compact([5, 6, 7], start=4)
    assert c.k[0, 0, :7, 0].tolist() == [0, 1, 2, 3, 5, 6, 7]


def test_write_past_capacity_is_an_error():
    c = filled(10)
    with pytest.raises(ValueError, match="overflow"):
        c.write(0, 15, torch.zeros(1, 2, 3), torch.zeros(1, 2, 3))


def test_compacting_a_branch_equals_running_the_path_autoregressively():
    lm = tiny_lm("llama")
    prefix, branch_a, path = [3, 4, 5], [9], [10, 11]
    cache = lm.new_cache()
    lm.forward(prefix, range(3), cache)
    # a tree: a (pos 3) | x (pos 3) -> y (pos 4); the accepted path is x -> y
    mask = causal_mask(3, 3, lm.device)
    mask[1:, 3] = False
    lm.forward(branch_a + path, [3, 3, 4], cache, mask=mask)
    cache.compact([4, 5], start=3)
    ref = lm.new_cache()
    for i, tok in enumerate(prefix + path):
        lm.forward([tok], [i], ref)
    assert cache.length == ref.length == 5
    torch.testing.assert_close(cache.k[:, :, :5], ref.k[:, :, :5], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cache.v[:, :, :5], ref.v[:, :, :5], atol=1e-5, rtol=1e-5)
