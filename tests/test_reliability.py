"""Issue 12 outside the engine: no outbound connection a visitor can trigger, bounded caches and state,
capped prompts, export files cleaned up."""
from __future__ import annotations

import socket

import gradio as gr
import pytest

from core.model.loading import ModelLoadError, load_model
from ui import models
from ui.handlers import load_models


@pytest.fixture
def no_network(monkeypatch):
    """Every attempt to open a socket is recorded and refused."""
    attempts: list = []

    class NoSocket(socket.socket):
        def __init__(self, *args, **kwargs):
            attempts.append(("socket", args))
            raise OSError("network disabled by the test")

    def no_connection(address, *args, **kwargs):
        attempts.append(("create_connection", address))
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket, "socket", NoSocket)
    monkeypatch.setattr(socket, "create_connection", no_connection)
    return attempts


@pytest.fixture
def public_bind(monkeypatch):
    for var in ("SPECSCOPE_ALLOW_HUB", "SPECSCOPE_HUB_MODELS", "SPECSCOPE_HUB_MAX_MB", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.1.1", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                            ("192.168.1.5", False), ("example.org", False), ("", False)])
def test_loopback_detection(host, loopback):
    assert models.is_loopback(host) is loopback


def test_hub_is_off_by_default_on_a_public_bind_and_the_page_says_so(public_bind):
    policy = models.hub_policy()
    assert not policy.enabled and "0.0.0.0" in policy.why
    assert "'embedded' only" in models.model_box_info()  # (after the real models fetched at install, if any)


def test_hub_default_on_loopback_lists_what_it_may_load(monkeypatch, public_bind):
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.1")
    assert models.hub_policy().enabled
    info = models.model_box_info()
    assert all(name in info for name in models.DEFAULT_ALLOW) and "MB" in info


@pytest.mark.parametrize("handler", ["load", "step"])
def test_a_hub_id_typed_with_the_hub_off_opens_no_socket(handler, public_bind, no_network):
    from ui.handlers import step
    from ui.view_specs import VIEWS
    with pytest.raises(gr.Error, match="Hub models is off"):
        if handler == "load":
            load_models("Qwen/Qwen2.5-0.5B", "embedded")
        else:
            step(VIEWS["talon"], run=None, prompt="def f(x):", N=8, K=4, mu=0.05, k_init=1, shape_temperature=1.0, temperature=0.0, seed=0,
                 max_new_tokens=4, target="Qwen/Qwen2.5-0.5B", draft="embedded")
    assert no_network == []


def test_ids_off_the_allow_list_are_refused_before_any_socket(monkeypatch, public_bind, no_network):
    monkeypatch.setenv("SPECSCOPE_ALLOW_HUB", "1")
    with pytest.raises(gr.Error, match="not on this server's list"):
        load_models("someone/huge-model", "embedded")
    assert no_network == []


def test_the_size_cap_refuses_a_large_repository(monkeypatch, public_bind):
    monkeypatch.setenv("SPECSCOPE_ALLOW_HUB", "1")
    monkeypatch.setenv("SPECSCOPE_HUB_MODELS", "someone/huge-model")
    monkeypatch.setenv("SPECSCOPE_HUB_MAX_MB", "500")
    monkeypatch.setattr(models, "hub_reachable", lambda: True)
    monkeypatch.setattr(models, "hub_size_mb", lambda name: 14_000.0)
    assert models.resolve_model("someone/huge-model", "target") == "someone/huge-model"  # allowed by name
    with pytest.raises(ValueError, match="14,000 MB.*at most 500 MB"):
        models.get_models("someone/huge-model", "embedded", needs_draft=False)


def test_hf_hub_offline_is_honoured_when_loading(monkeypatch, public_bind, no_network):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)  # load_model sets it; restore after
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="HF_HUB_OFFLINE"):
        load_model("nobody/no-such-model", "cpu")
    monkeypatch.setenv("SPECSCOPE_ALLOW_HUB", "1")
    monkeypatch.setenv("SPECSCOPE_HUB_MODELS", "nobody/no-such-model")
    with pytest.raises(gr.Error, match="HF_HUB_OFFLINE"):
        load_models("nobody/no-such-model", "embedded")
    assert no_network == []


def test_the_embedded_models_load_with_the_network_off(public_bind, no_network):
    assert "Loaded target 'embedded'" in load_models("embedded", "embedded")
    assert no_network == []


KNOBS = {"talon": (("N", 8), ("K", 4), ("mu", 0.05), ("k_init", 1), ("shape_temperature", 1.0)),
         "specbound": (("alpha", 0.5), ("tau_exit", 0.1), ("d_max", 4), ("w_max", 8)),
         "chain": (("gamma", 4),)}


def small_run(prompt: str, method: str = "talon"):
    from ui.config import RunConfig
    from ui.run import Run
    return Run.start(RunConfig(method, prompt, KNOBS[method], max_new_tokens=24))


def has_caches(run) -> bool:
    from ui.worker import SESSIONS
    return SESSIONS.has_caches(run.token)


@pytest.mark.parametrize("method", ["talon", "specbound", "chain"])
def test_only_recently_stepped_sessions_keep_caches_and_evicted_ones_continue_exactly(method, monkeypatch,
                                                                                      heldout_prompts):
    monkeypatch.setenv("SPECSCOPE_CACHED_SESSIONS", "2")
    a, b, c = (small_run(p, method) for p in heldout_prompts[:3])
    for run in (a, b, c):
        run.step()
    assert not has_caches(a) and has_caches(b) and has_caches(c)
    a.step()  # rebuilt from a's committed text; now b is the least recently stepped
    a.step()
    assert has_caches(a) and not has_caches(b) and has_caches(c)
    monkeypatch.setenv("SPECSCOPE_CACHED_SESSIONS", "100")
    alone = small_run(heldout_prompts[0], method)
    for _ in range(3):
        alone.step()
    assert a.ids == alone.ids
    assert [t.tau for t in a.traces] == [t.tau for t in alone.traces]


def test_a_stepping_session_is_never_evicted_and_forget_frees_caches(monkeypatch, heldout_prompts):
    from ui.run import forget
    from ui.worker import SESSIONS
    monkeypatch.setenv("SPECSCOPE_CACHED_SESSIONS", "1")
    a, b = small_run(heldout_prompts[0]), small_run(heldout_prompts[1])
    a.step()
    with SESSIONS.get(a.token).lock:  # as if a were in the middle of a step in another thread
        b.step()
        assert has_caches(a) and has_caches(b)
    forget(b)
    assert not has_caches(b) and SESSIONS.get(b.token) is None
    forget(None)


def test_a_huge_prompt_is_refused_before_tokenizing(monkeypatch):
    from ui.handlers import step
    from ui.view_specs import VIEWS
    from core.model.causal_lm import CausalLM
    calls = []
    monkeypatch.setattr(CausalLM, "tokenizer", property(lambda self: calls.append(1)), raising=False)
    with pytest.raises(gr.Error, match="characters"):
        step(VIEWS["talon"], run=None, prompt="x = 1\n" * 1_000_000, N=8, K=4, mu=0.05, k_init=1, shape_temperature=1.0, temperature=0.0,
             seed=0, max_new_tokens=4)
    assert calls == []


def test_export_files_are_pruned(monkeypatch):
    import os
    from ui.tempfiles import export_dir, prune, write_export
    monkeypatch.setenv("SPECSCOPE_EXPORT_TTL_S", "3600")
    first = write_export({"n": 1})
    assert os.path.dirname(first) == str(export_dir())
    old = os.path.getmtime(first) - 7200
    os.utime(first, (old, old))
    second = write_export({"n": 2})  # prunes this process's exports older than the time-to-live
    assert not os.path.exists(first) and os.path.exists(second)
    # other tests' exports may share this process's folder: all of them are past a time-to-live of 0
    assert prune(export_dir(), 0, now=os.path.getmtime(second) + 1) >= 1 and not os.path.exists(second)


def test_page_state_has_a_time_to_live_and_frees_caches(monkeypatch):
    import app
    from ui.run import forget
    monkeypatch.setenv("SPECSCOPE_STATE_TTL_S", "120")
    demo = app.build_demo()
    states = [b for b in demo.blocks.values() if isinstance(b, gr.State)]
    assert len(states) >= 2
    assert all(s.time_to_live == 120 and s.delete_callback == forget for s in states)
