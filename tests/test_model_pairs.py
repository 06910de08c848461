"""Real models on the page, offline: the curated (target, EAGLE-3 head) pairs the operator allows fill the model
boxes, the eagle3 drafter and chat auto; a head id goes through the same allow-list and size checks as a
target; a gated or private repository (401/403) is one line naming HF_TOKEN; a head that does not fit the
target says why in one line."""
import pytest

from core.model.loading import ModelLoadError, denied_line
from ui import models
from ui.handlers import choose_pair


@pytest.fixture
def hub_on(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_ALLOW_HUB", "1")
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.1")


def test_the_menu_offers_only_pairs_the_operator_allows(hub_on, monkeypatch):
    real = [name for name in models.REAL_MODELS if models.real_fetched(name)]  # fetched at install: always offered
    default = [value for _, value in models.pair_choices()]
    assert default == [*real, "embedded", "Qwen/Qwen3-1.7B"]  # the default allow-list and size cap: the smallest pair
    monkeypatch.setenv("SPECSCOPE_HUB_MODELS", "*")
    monkeypatch.setenv("SPECSCOPE_HUB_MAX_MB", "20000")
    every = [value for _, value in models.pair_choices()]
    assert every == [*real, "embedded", *(p.target for p in models.PAIRS)]
    assert "gated: needs HF_TOKEN" in dict((v, k) for k, v in models.pair_choices())["meta-llama/Llama-3.1-8B-Instruct"]
    monkeypatch.setenv("SPECSCOPE_ALLOW_HUB", "0")
    assert [value for _, value in models.pair_choices()] == [*real, "embedded"]


def test_choosing_a_pair_fills_the_boxes_the_drafter_and_chat():
    assert choose_pair("Qwen/Qwen3-1.7B") == ("Qwen/Qwen3-1.7B", "AngelSlim/Qwen3-1.7B_eagle3", "auto",
                                              "eagle3", "eagle3", "eagle3")
    target, draft, chat, *drafters = choose_pair("embedded")
    assert (target, draft, chat) == ("embedded", "embedded", "auto") and set(drafters) == {models.DEFAULT_DRAFTER}


def test_a_head_id_is_checked_like_a_target(hub_on, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_HUB_MODELS", "Qwen/Qwen3-1.7B")
    with pytest.raises(ValueError, match="not on this server's list"):
        models.get_models("embedded", "AngelSlim/Qwen3-1.7B_eagle3", True, "eagle3")
    assert models.resolve_head("embedded") is None and models.resolve_head("") is None


def test_the_embedded_head_on_another_target_says_why_in_one_line(monkeypatch):
    from tests.tiny_models import tiny_lm
    tiny = tiny_lm()
    with pytest.raises(ValueError) as err:
        models.new_drafter("eagle3", tiny, None)
    assert "cannot be used with this target" in str(err.value) and "\n" not in str(err.value)


def test_a_gated_repository_is_one_line_naming_hf_token(monkeypatch):
    from core.model import loading
    class GatedRepoError(OSError):
        pass

    assert denied_line("x/y", GatedRepoError("401 Client Error: access to model x/y is restricted")) is not None
    assert denied_line("x/y", OSError("404 not found")) is None
    monkeypatch.setattr(loading, "hub_offline", lambda: False)
    monkeypatch.setattr(loading, "hub_reachable", lambda *a, **k: True)

    def refuse(*args, **kwargs):
        if kwargs.get("local_files_only"):
            raise OSError("not in the cache")
        raise OSError("You are trying to access a gated repo. 401 Client Error")

    monkeypatch.setattr(loading.AutoConfig, "from_pretrained", refuse)
    with pytest.raises(ModelLoadError) as err:
        loading._load_config("meta-llama/Llama-3.1-8B-Instruct", False, "meta-llama/Llama-3.1-8B-Instruct")
    assert "HF_TOKEN" in str(err.value) and "\n" not in str(err.value)


def test_a_gated_head_is_one_line_too(monkeypatch):
    import huggingface_hub
    from core import drafter_registry
    from core.eagle3.loading import HeadLoadError
    monkeypatch.setattr(drafter_registry, "hub_offline", lambda: False)
    monkeypatch.setattr(drafter_registry, "hub_reachable", lambda *a, **k: True)

    def refuse(*args, **kwargs):
        raise OSError("403 Forbidden: gated")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    with pytest.raises(HeadLoadError, match="HF_TOKEN"):
        drafter_registry.head_folder("someone/gated-head")


def test_the_talon_view_reads_out_whether_the_head_fits():
    from core.eagle3.readout import PositionTally, readout
    from ui import handlers as h
    from viz.html import compat_html
    from tests.handler_helpers import step
    run = None
    for _ in range(3):
        out = step(run, drafter="eagle3")
        run = out["run"]
    assert "SafeAILab layout, taps 2,6,9" in out["compat"] and "d=0:" in out["compat"]
    assert "draft vocabulary holds" in out["compat"] and "ss-alert" not in out["compat"]
    data = h.export_trace(run)[1]
    assert data["head"]["taps"] == [2, 6, 9] and data["compat"]["steps"] == 3
    bad = PositionTally(reached=[25], accepted=[2], judged=[25], committed=40)  # a head that almost never lands position 0
    assert "may not match this target" in compat_html(readout(bad, run.head))
    assert "ss-alert" not in compat_html(readout(bad, None))  # the draft LM or lookup: no head to blame
