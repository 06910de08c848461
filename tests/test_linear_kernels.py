"""The CPU product kernels (core/model/linear_kernels.py): each computes F.linear's values, a plan picks per row count
and keeps F.linear unless another kernel is clearly faster, and every method stays lossless on each kernel."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from core.drafters.self_drafter import SelfDrafter
from core.engine import Session
from core.methods import build_method
from core.model import linear_kernels as lk
from core.model.exit_heads import logit_lens
from core.model.linear_kernels import LINEAR, NARROW, PACKED, PLAIN, LinearPlan, Product
from tests.tiny_models import tiny_lm

KERNELS = [LINEAR, NARROW] + ([PACKED] if lk.packed_available() else [])
PROMPT = [4, 9, 13, 2, 7, 4, 9]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("rows", [1, 2, 3, 7, 13, 40])
def test_every_kernel_computes_the_product(kernel, rows):
    g = torch.Generator().manual_seed(rows)
    w, b = torch.randn(96, 48, generator=g), torch.randn(96, generator=g)
    x = torch.randn(rows, 48, generator=g)
    with torch.inference_mode():
        for bias in (None, b):
            y = Product(w, bias).run(kernel, x)
            assert y.shape == (rows, 96) and y.is_contiguous()
            torch.testing.assert_close(y, F.linear(x, w, bias), rtol=1e-5, atol=1e-5)


def test_a_plan_maps_every_row_count_to_the_kernel_of_the_size_below_it():
    plan = LinearPlan((1, 3, 8), (NARROW, PACKED, LINEAR))
    assert [plan.kernel(t) for t in (1, 2, 3, 7, 8, 500)] == [NARROW, NARROW, PACKED, PACKED, LINEAR, LINEAR]
    assert plan.describe() == "T 1–2: narrow · 3–7: packed · 8+: linear"
    assert LinearPlan((1, 2), (NARROW, NARROW)).describe() == "T 1+: narrow"


def test_the_plan_keeps_f_linear_unless_another_kernel_is_clearly_faster():
    ms = {LINEAR: [1.00, 1.00, 1.00], NARROW: [0.90, 0.97, 1.20], PACKED: [0.99, 2.0, 0.50]}
    assert lk.fastest_plan(ms, (1, 2, 3)).kernels == (NARROW, LINEAR, PACKED)  # 3% faster is noise, not a reason


def test_measuring_times_each_kernel_at_each_size():
    products = [Product(torch.randn(64, 32), None) for _ in range(3)]
    plan, ms = lk.measure_plan(products, tuple(KERNELS), sizes=(1, 4), reps=1)
    assert plan.sizes == (1, 4) and set(plan.kernels) <= set(KERNELS)
    assert set(ms) == set(KERNELS) and all(len(v) == 2 and min(v) > 0 for v in ms.values())


def test_small_models_off_the_cpu_or_in_fp16_keep_f_linear(monkeypatch):
    monkeypatch.delenv(lk.ENV, raising=False)
    small = [Product(torch.randn(64, 32), None)]
    assert lk.plan_for(small, torch.device("cpu"), "tiny") is PLAIN
    big = [Product(torch.randn(2048, 1024, dtype=torch.float16), None)]  # 4 MiB, but fp16
    assert lk.plan_for(big, torch.device("cpu"), "fp16") is PLAIN
    assert lk.plan_for([Product(torch.randn(2048, 1024), None)], torch.device("cuda"), "gpu") is PLAIN


def test_the_environment_forces_one_kernel_or_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv(lk.ENV, "narrow")
    assert lk.plan_for([], torch.device("cpu"), "x").kernel(5) == NARROW
    monkeypatch.setenv(lk.ENV, "linear")
    assert lk.plan_for([], torch.device("cpu"), "x") is PLAIN
    monkeypatch.setenv(lk.ENV, "fastest")
    with pytest.raises(ValueError, match="SPECSCOPE_LINEAR must be auto, linear, narrow, packed"):
        lk.plan_for([], torch.device("cpu"), "x")


def test_a_measured_plan_is_kept_on_disk_for_this_machine(monkeypatch, tmp_path):
    monkeypatch.delenv(lk.ENV, raising=False)
    monkeypatch.setenv("SPECSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(lk, "MIN_MB", 0.0)
    monkeypatch.setattr(lk, "_MEMO", {})
    products = [Product(torch.randn(128, 64), None) for _ in range(2)]
    calls = []
    real = lk.measure_plan
    monkeypatch.setattr(lk, "measure_plan", lambda p, k: calls.append(1) or real(p, k, sizes=(1, 2), reps=1))
    first = lk.plan_for(products, torch.device("cpu"), "disk-test")
    assert calls == [1] and len(list(tmp_path.glob("cost-*.json"))) == 1
    monkeypatch.setattr(lk, "_MEMO", {})  # a new process: read back from disk, not measured again
    assert lk.plan_for(products, torch.device("cpu"), "disk-test") == first and calls == [1]


def test_autograd_takes_f_linear_so_training_still_works():
    lin = nn.Linear(16, 8)
    lk.install(lin, LinearPlan((1,), (NARROW,)))
    x = torch.randn(2, 16, requires_grad=True)
    lin(x).sum().backward()
    assert x.grad is not None and lin.weight.grad is not None
    with torch.inference_mode():
        torch.testing.assert_close(lin(x.detach()), F.linear(x.detach(), lin.weight, lin.bias))
    first = lin.forward
    lk.install(lin, LinearPlan((1,), (NARROW,)))  # installed again (a second drafter on the same head): kept
    assert lin.forward is first
    lk.install(lin, PLAIN)
    assert "forward" not in lin.__dict__


def test_a_packed_copy_follows_an_in_place_edit_of_its_weight():
    if not lk.packed_available():
        pytest.skip("no oneDNN in this torch build")
    w = torch.randn(32, 16)
    p, x = Product(w, None, LinearPlan((1,), (PACKED,))), torch.randn(3, 16)
    with torch.inference_mode():
        before = p(x)
    with torch.no_grad():
        w.mul_(2.0)
    with torch.inference_mode():
        torch.testing.assert_close(p(x), 2 * before, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_method_on_each_kernel_equals_ar(kernel):
    """The tiny model is below MIN_MB and would keep F.linear: force the kernel on every product, then decode."""
    lm = tiny_lm("qwen2", seed=1, num_hidden_layers=4)  # biases on q/k/v
    lm.use_plan(LinearPlan((1,), (kernel,)))
    ar = Session(lm, build_method("ar"), PROMPT, max_new_tokens=24).generate().output_ids
    for name, knobs in [("talon", dict(N=8, K=2, mu=0.1)), ("chain", dict(gamma=3))]:
        s = Session(lm, build_method(name, **knobs), PROMPT, max_new_tokens=24, draft=SelfDrafter(lm, logit_lens(lm), 2))
        assert s.generate().output_ids == ar, (kernel, name)
    for knobs in (dict(exit_heads="lens"), dict(exit_heads="lens", preset="fast")):
        assert Session(lm, build_method("specbound", **knobs), PROMPT, max_new_tokens=24).generate().output_ids == ar


def test_the_kernel_plan_script_prints_its_table_and_the_plan(capsys):
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("kernel_plan", Path(__file__).parent.parent / "scripts" / "kernel_plan.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(["--sizes", "1,3", "--reps", "1"])
    out = capsys.readouterr().out
    assert "| kernel | T = 1 | T = 3 |" in out and "| linear |" in out and "| narrow |" in out
    assert "measured now: T 1" in out and "the plan in use: T 1" in out


def test_a_bf16_model_gets_a_measured_plan_and_every_kernel_agrees_in_bf16(monkeypatch, tmp_path):
    """bf16 is planned too: oneDNN over a packed bf16 weight decoded SmolLM2's one-row products 1.8x faster than
    F.linear on an AVX512-BF16 CPU (docs/bench/real_model.md), so the choice is measured there as in fp32."""
    monkeypatch.delenv(lk.ENV, raising=False)
    monkeypatch.setenv("SPECSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(lk, "MIN_MB", 0.0)
    monkeypatch.setattr(lk, "_MEMO", {})
    products = [Product(torch.randn(128, 64, dtype=torch.bfloat16), None) for _ in range(2)]
    real = lk.measure_plan
    monkeypatch.setattr(lk, "measure_plan", lambda p, k: real(p, k, sizes=(1, 2), reps=1))
    plan = lk.plan_for(products, torch.device("cpu"), "bf16-test")
    assert plan is not PLAIN and plan.sizes == (1, 2)
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    want = F.linear(x.float(), products[0].w.float())
    for kernel in lk.candidates(products):
        got = products[0].run(kernel, x)
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not lk.packed_available(), reason="this torch build has no oneDNN")
def test_padded_rows_give_the_rows_asked_for():
    """PADDED computes fewer than PAD_ROWS rows as the first rows of a zero-padded product: the same values as
    the packed kernel's (to bf16's step), and exactly the rows asked for."""
    p = Product(torch.randn(96, 64, dtype=torch.bfloat16), torch.randn(96, dtype=torch.bfloat16))
    for T in (1, 2, 3, 4, 7):
        x = torch.randn(T, 64, dtype=torch.bfloat16)
        got = p.run(lk.PADDED, x)
        assert got.shape == (T, 96)
        torch.testing.assert_close(got.float(), p.run(lk.PACKED, x).float(), rtol=2e-2, atol=5e-2)
