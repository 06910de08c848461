"""What the cache folder holds is read as untrusted input (issue 46, item 11): a kernel plan or cost curve that is
valid JSON but not one of ours is ignored and measured again, a FIFO or a link at an entry's path is never read
through or written through, and a write lands whole."""
import json
import os
import time

import pytest
import torch

from core.auto.cost_model import CostModel
from core.engine import Session
from core.methods import build_method
from core.model import cost_cache
from core.model import linear_kernels as lk
from core.model.linear_kernels import LinearPlan, Product

HOSTILE_PLANS = [{"sizes": [], "kernels": []}, {"sizes": [5, -3], "kernels": ["linear", "narrow"]},
                 {"sizes": [1], "kernels": "packed"}, {"sizes": [1, 10 ** 8], "kernels": ["linear", "narrow"]},
                 {"sizes": [1, 2], "kernels": ["linear", "rm -rf"]}, {"sizes": "12", "kernels": ["linear"]}]


@pytest.fixture
def plan_env(monkeypatch, tmp_path):
    monkeypatch.delenv(lk.ENV, raising=False)
    monkeypatch.setenv("SPECSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(lk, "MIN_MB", 0.0)
    monkeypatch.setattr(lk, "_MEMO", {})
    real = lk.measure_plan
    calls = []
    monkeypatch.setattr(lk, "measure_plan", lambda p, k: calls.append(1) or real(p, k, sizes=(1, 2), reps=1))
    products = [Product(torch.randn(64, 32), None) for _ in range(2)]
    path = cost_cache.path_for(tmp_path, "linear-plan|hostile")
    return products, path, calls


def stored(fields: dict) -> dict:
    return {**fields, "fingerprint": cost_cache.fingerprint("cpu"), "measured_at": time.time()}


@pytest.mark.parametrize("fields", HOSTILE_PLANS)
def test_a_stored_plan_that_is_not_ours_is_measured_again(plan_env, fields):
    products, path, calls = plan_env
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stored(fields)))
    t0 = time.perf_counter()
    plan = lk.plan_for(products, torch.device("cpu"), "hostile")
    assert calls == [1] and time.perf_counter() - t0 < 10
    assert plan.sizes[0] == 1 and set(plan.kernels) <= set(lk.KERNELS)
    assert json.loads(path.read_text())["sizes"] == list(plan.sizes)  # replaced by the measured plan


@pytest.mark.parametrize("fields", HOSTILE_PLANS)
def test_the_plan_type_refuses_what_no_measurement_gives(fields):
    with pytest.raises((ValueError, TypeError)):
        LinearPlan(tuple(fields["sizes"]), tuple(fields["kernels"]))


def test_a_fifo_at_the_entry_is_not_read(plan_env):
    products, path, calls = plan_env
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    assert cost_cache.load(path, cost_cache.fingerprint("cpu")) is None  # returns at once: never opened
    lk.plan_for(products, torch.device("cpu"), "hostile")
    assert calls == [1] and path.is_file() and not path.is_symlink()  # the measured plan replaced the FIFO


def test_a_link_at_the_entry_is_neither_followed_nor_written_through(plan_env, tmp_path):
    products, path, calls = plan_env
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(victim)
    lk.plan_for(products, torch.device("cpu"), "hostile")
    assert calls == [1] and victim.read_text() == "keep me"
    assert not path.is_symlink() and json.loads(path.read_text())["sizes"][0] == 1


def test_an_oversized_entry_is_not_read(plan_env):
    products, path, calls = plan_env
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stored({"sizes": [1], "kernels": ["linear"], "pad": "x" * (2 << 20)})))
    lk.plan_for(products, torch.device("cpu"), "hostile")
    assert calls == [1]


@pytest.mark.parametrize("bad", [dict(verify_n=[], verify_ms=[]), dict(verify_n=[1, -2], verify_ms=[1.0, 2.0]),
                                 dict(verify_n=[1, 2], verify_ms=[1.0]), dict(verify_ms=[1.0, float("nan")]),
                                 dict(verify_n="12"), dict(draft_width=[10 ** 9], draft_ms=[1.0])])
def test_a_cost_curve_that_no_measurement_gives_is_refused(bad):
    good = dict(key="cpu|m|fp32|d", verify_n=[1, 2], verify_ms=[1.0, 2.0], draft_width=[1], draft_ms=[0.1])
    CostModel(**good)
    with pytest.raises(ValueError):
        CostModel(**{**good, **bad})


def test_decoding_after_a_hostile_plan_equals_ar(monkeypatch, tmp_path):
    """A model whose plan entry is hostile: measured again at load, and every method still equals AR."""
    from core.drafters.lookup import LookupDrafter
    from tests.tiny_models import tiny_lm
    monkeypatch.delenv(lk.ENV, raising=False)
    monkeypatch.setenv("SPECSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(lk, "_MEMO", {})
    monkeypatch.setattr(lk, "MIN_MB", 0.0)
    probe = tiny_lm("llama", seed=0)
    path = cost_cache.path_for(tmp_path, f"linear-plan|{probe.signature}")
    for p in tmp_path.glob("cost-*.json"):
        p.unlink()
    monkeypatch.setattr(lk, "_MEMO", {})
    path.write_text(json.dumps(stored({"sizes": [], "kernels": "packed"})))
    lm = tiny_lm("llama", seed=0)  # loading reads the plan entry
    assert lm.plan.sizes[0] == 1
    prompt = [4, 9, 13, 2, 7, 4, 9]
    ar = Session(lm, build_method("ar"), prompt, max_new_tokens=16).generate().output_ids
    for name in ("chain", "talon"):
        got = Session(lm, build_method(name), prompt, max_new_tokens=16, draft=LookupDrafter(lm.vocab_size)).generate()
        assert got.output_ids == ar
