"""The EAGLE-3 head's LM head in int8 (core/eagle3/int8_scores.py): close to the float scores, chosen by
`head_int8` as declared, and invisible in the output — greedy decoding through it equals AR on every tree
method (its sampling check is in test_drafters.py)."""
import pytest
import torch

from core.ar import ARMethod
from core.drafter_registry import drafter_factory
from core.eagle3.drafter import EagleDrafter
from core.eagle3.int8_scores import AUTO_MIN_WEIGHTS, available, int8_scores, use_int8
from core.engine import Session
from core.methods import build_method
from tests.test_drafters import TREES, head_of
from tests.tiny_models import tiny_lm

pytestmark = pytest.mark.skipif(not available(), reason="this PyTorch build has no x86 quantized kernels")


def test_int8_scores_track_the_float_product_and_keep_clear_winners():
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 500, bias=False)
    x = torch.randn(8, 64)
    ref, got = lin(x).detach(), int8_scores(lin)(x)  # (8, 500)
    assert got.shape == ref.shape and got.dtype == torch.float32
    assert float((got - ref).abs().max()) < 0.05 * float(ref.abs().max())
    x[:, :] = lin.weight[7].detach() * 4  # a clear winner: row 7's own direction
    assert int8_scores(lin)(x).argmax(-1).eq(7).all()
    first = int8_scores(lin)
    assert int8_scores(lin) is first  # made once per weight ...
    with torch.no_grad():
        lin.weight.mul_(2)
    assert int8_scores(lin) is not first  # ... and remade when it changes
    ref = lin(x).detach()
    assert float((int8_scores(lin)(x) - ref).abs().max()) < 0.05 * float(ref.abs().max())


def test_head_int8_choices():
    small = torch.nn.Linear(8, 16, bias=False)
    assert use_int8("on", small) and not use_int8("off", small) and not use_int8("auto", small)
    big = torch.nn.Linear(AUTO_MIN_WEIGHTS // 256, 256, bias=False, device="meta").to_empty(device="cpu")
    assert use_int8("auto", big)
    with pytest.raises(ValueError, match="head_int8 must be one of"):
        use_int8("yes", small)


def test_a_bad_head_int8_is_one_line_when_the_drafter_is_built(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    folder = str(tmp_path / "h")
    head_of(target, tmp_path / "h")
    with pytest.raises(ValueError) as err:
        drafter_factory("eagle3", target, folder, "cpu", {"head_int8": "maybe"})
    assert "\n" not in str(err.value)
    on = drafter_factory("eagle3", target, folder, "cpu", {"head_int8": "on"})()
    off = drafter_factory("eagle3", target, folder, "cpu", {"head_int8": "off"})()
    assert on.identity == off.identity + "|int8"  # cost curves are kept apart
    assert "int8" in on.info.scoring and "int8" in on.info.line() and off.info.scoring == ""


@pytest.mark.parametrize("draft_vocab", [48, None])
def test_greedy_through_int8_scores_equals_ar(tmp_path, draft_vocab):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    head = head_of(target, tmp_path / "head", draft_vocab=draft_vocab)
    for prompt in ([5, 17, 33, 8], [9, 9, 40, 2, 11, 30, 7]):
        ar = Session(target, ARMethod(), prompt, max_new_tokens=30).generate()
        for label, name, knobs in TREES:
            got = Session(target, build_method(name, **knobs), prompt, max_new_tokens=30,
                          draft=EagleDrafter(head, target, "on")).generate()
            assert got.output_ids == ar.output_ids, label
