"""Our forward equals Hugging Face's own forward for every supported family."""
import pytest
import torch

from core.model.causal_lm import causal_mask
from tests.tiny_models import FAMILIES, tiny_lm


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_forward_matches_hf_full_sequence(family):
    lm = tiny_lm(family)
    ids = torch.randint(2, 64, (20,), generator=torch.Generator().manual_seed(1))
    ours = lm.forward(ids, torch.arange(20), lm.new_cache()).logits
    with torch.no_grad():
        theirs = lm.hf(input_ids=ids[None]).logits[0]
    torch.testing.assert_close(ours, theirs.float(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_incremental_decoding_with_cache_matches_hf(family):
    lm = tiny_lm(family)
    ids = torch.randint(2, 64, (16,), generator=torch.Generator().manual_seed(2))
    cache = lm.new_cache()
    first = lm.forward(ids[:9], torch.arange(9), cache).logits
    rest = [lm.forward(ids[i : i + 1], torch.tensor([i]), cache).logits for i in range(9, 16)]
    ours = torch.cat([first, *rest])
    with torch.no_grad():
        theirs = lm.hf(input_ids=ids[None]).logits[0].float()
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_hidden_states_match_hf():
    lm = tiny_lm("llama")
    ids = torch.randint(2, 64, (10,), generator=torch.Generator().manual_seed(3))
    out = lm.forward(ids, torch.arange(10), lm.new_cache(), return_hidden=True)
    with torch.no_grad():
        hf = lm.hf(input_ids=ids[None], output_hidden_states=True).hidden_states
    assert len(out.hidden) == lm.num_layers + 1
    for ours, theirs in zip(out.hidden[:-1], hf[:-1]):  # HF's last entry is after the final norm
        torch.testing.assert_close(ours, theirs[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(lm.body.norm(out.hidden[-1]), hf[-1][0], atol=1e-4, rtol=1e-4)


def test_explicit_positions_and_mask_reproduce_a_branch():
    """A token placed after a sibling branch, with the sibling masked out, sees only its own path."""
    lm = tiny_lm("qwen3")
    prefix = [5, 6, 7, 8]
    cache = lm.new_cache()
    lm.forward(prefix, range(4), cache)
    # new tokens: a (pos 4), b (pos 4, sibling of a), c (pos 5, child of b)
    mask = causal_mask(4, 3, lm.device)
    mask[1, 4] = False  # b does not see a
    mask[2, 4] = False  # c does not see a
    tree = lm.forward([10, 11, 12], [4, 4, 5], cache, mask=mask).logits
    ref = lm.forward(prefix + [11, 12], range(6), lm.new_cache()).logits
    torch.testing.assert_close(tree[1:], ref[4:], atol=1e-4, rtol=1e-4)
