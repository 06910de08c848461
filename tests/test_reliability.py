"""Issue 12 outside the engine: no outbound connection a visitor can trigger, bounded caches and state,
capped prompts, export files cleaned up."""
from __future__ import annotations

import socket

import gradio as gr
import pytest

from core.loading import ModelLoadError, load_model
from ui import models
from ui.tab_handlers import load_models


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
    assert models.model_box_info().startswith("'embedded' only")


def test_hub_default_on_loopback_lists_what_it_may_load(monkeypatch, public_bind):
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.1")
    assert models.hub_policy().enabled
    info = models.model_box_info()
    assert all(name in info for name in models.DEFAULT_ALLOW) and "MB" in info


@pytest.mark.parametrize("handler", ["load", "step"])
def test_a_hub_id_typed_with_the_hub_off_opens_no_socket(handler, public_bind, no_network):
    from ui.handlers import talon_step
    with pytest.raises(gr.Error, match="Hub models is off"):
        if handler == "load":
            load_models("Qwen/Qwen2.5-0.5B", "embedded")
        else:
            talon_step(None, "def f(x):", 8, 4, 0.05, 1, 0.0, 0, 4, "Qwen/Qwen2.5-0.5B", "embedded")
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
    monkeypatch.setattr(models, "hub_size_mb", lambda name: 14_000.0)
    with pytest.raises(ValueError, match="14,000 MB.*at most 500 MB"):
        models.resolve("someone/huge-model", "target")


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
