"""--compile: the compiled layer halves compute each family's layer, and every method on them stays lossless."""
import pytest
import torch
from torch._dynamo.utils import counters

from core.drafters.self_drafter import SelfDrafter
from core.engine import Session
from core.methods import build_method
from core.model.exit_heads import logit_lens
from tests.tiny_models import tiny_lm

PROMPT = [4, 9, 13, 2, 7, 4, 9]


def prefill_then_step(lm) -> torch.Tensor:
    """Logits of a 7-token prefill, then of 3 more tokens over its cache: (10, V)."""
    cache = lm.new_cache(32)
    first = lm.forward(PROMPT, list(range(7)), cache).logits
    return torch.cat([first, lm.forward([5, 6, 7], [7, 8, 9], cache).logits])


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()  # each test's graphs from scratch: families differ in biases and q/k norms
    yield
    torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "mistral"])
def test_the_compiled_halves_compute_each_familys_layer(family, fresh_dynamo):
    lm = tiny_lm(family, seed=1, num_hidden_layers=4)
    eager = prefill_then_step(lm)
    lm.compile_layers(warm=False)
    compiled = prefill_then_step(lm)
    assert counters["stats"]["unique_graphs"] >= 2  # both halves ran compiled, not eager
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)
    assert torch.equal(compiled.argmax(-1), eager.argmax(-1))


@pytest.mark.slow
def test_every_method_on_the_compiled_layers_equals_ar(fresh_dynamo):
    lm = tiny_lm("llama", seed=1, num_hidden_layers=4)
    eager_ar = Session(lm, build_method("ar"), PROMPT, max_new_tokens=24).generate().output_ids
    lm.compile_layers()
    assert lm.compiled.compile_s > 0
    ar = Session(lm, build_method("ar"), PROMPT, max_new_tokens=24).generate().output_ids
    assert ar == eager_ar
    runs = [("talon", dict(N=8, K=2, mu=0.1)), ("chain", dict(gamma=3)), ("static", dict(N=8, K=2, depth=3))]
    for name, knobs in runs:
        s = Session(lm, build_method(name, **knobs), PROMPT, max_new_tokens=24, draft=SelfDrafter(lm, logit_lens(lm), 2))
        assert s.generate().output_ids == ar, name
    for knobs in (dict(exit_heads="lens"), dict(exit_heads="lens", preset="fast")):
        got = Session(lm, build_method("specbound", **knobs), PROMPT, max_new_tokens=24).generate().output_ids
        assert got == ar, f"specbound {knobs}"


def test_a_model_without_silu_is_refused_in_one_line():
    lm = tiny_lm("llama", seed=1, num_hidden_layers=2, hidden_act="gelu")
    with pytest.raises(ValueError, match="SiLU MLPs only"):
        lm.compile_layers()
    assert lm.compiled is None
