"""Shared fixtures. SPECSCOPE_TEST_DEVICE / SPECSCOPE_TEST_DTYPE (default cpu / auto = fp32 on CPU) move the
embedded and tiny test models to another device or precision, and SPECSCOPE_TEST_EPS sets the near-tie
threshold of the greedy equivalence checks: scripts/device_check.sh runs the same tests on CUDA this way."""
import os

os.environ.setdefault("SPECSCOPE_MODEL", "embedded")  # the page (and every app a test starts) opens on the
# embedded pair, the suite's fast workhorse; tests/test_real_model.py opens it on the real model itself
os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch loads (and for every app or CLI a test starts):
# the test models' ops are far too small to split across threads, which only contend (README: 44% slower)

import pytest

import core.lossless_check
import tests.tiny_models
from core.model.causal_lm import CausalLM
from core.model.device import pick_device
from core.model.loading import DEFAULT_DRAFT, DEFAULT_TARGET, load_model, pick_dtype
from core.prompts import ASSET_PROMPTS, read_prompts

TEST_DEVICE = os.environ.get("SPECSCOPE_TEST_DEVICE", "cpu")
TEST_DTYPE = os.environ.get("SPECSCOPE_TEST_DTYPE", "auto")
if os.environ.get("SPECSCOPE_TEST_EPS"):
    core.lossless_check.EPS = float(os.environ["SPECSCOPE_TEST_EPS"])
if os.environ.get("SPECSCOPE_TEST_MAX_NEAR_TIES"):  # bf16 parts from AR at ties far more often (see README)
    core.lossless_check.MAX_NEAR_TIE_SHARE = float(os.environ["SPECSCOPE_TEST_MAX_NEAR_TIES"])

if (TEST_DEVICE, TEST_DTYPE) != ("cpu", "auto"):  # before any test module imports tiny_lm
    _tiny_lm = tests.tiny_models.tiny_lm

    def _tiny_lm_on_device(*args, **kwargs) -> CausalLM:
        lm = _tiny_lm(*args, **kwargs)
        dev = pick_device(TEST_DEVICE)
        return CausalLM(lm.hf.to(device=dev, dtype=pick_dtype(TEST_DTYPE, dev)), lm.tokenizer, lm.name)

    tests.tiny_models.tiny_lm = _tiny_lm_on_device


@pytest.fixture(scope="session")
def target():
    return load_model(DEFAULT_TARGET, TEST_DEVICE, TEST_DTYPE)


@pytest.fixture(scope="session")
def draft():
    return load_model(DEFAULT_DRAFT, TEST_DEVICE, TEST_DTYPE)


@pytest.fixture(scope="session")
def heldout_prompts():
    return [r["prompt"] for r in read_prompts(ASSET_PROMPTS)]


@pytest.fixture(scope="session")
def ar_reference():
    """Greedy AR outputs shared by every test of the run: one decode per (model, prompt)."""
    return core.lossless_check.ARReference()
