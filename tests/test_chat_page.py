"""The chat toggle on the page: with a target whose tokenizer has a chat template, auto and on wrap the prompt
(the template's own text greyed, the export saying so) and every step still equals plain decoding of the same
ids; off and the embedded tokenizer (no template) leave the prompt raw; on without a template is one line."""
import json
import os

import gradio as gr
import pytest

from core.engine import Session
from core.lossless_check import Report, assert_equivalent, compare_tokens
from core.methods import build_method
from core.model.chat import prepare_prompt
from core.model.loading import DEFAULT_TARGET
from ui import handlers as h

from tests.handler_helpers import sb_step, step
from tests.test_chat import CHATML

PROMPT = "  def add(a, b):\n"


@pytest.fixture
def chat_embedded(tmp_path, monkeypatch):
    """The embedded target's folder with a chat template in its tokenizer config, as the page's 'embedded'."""
    folder = tmp_path / "target"
    folder.mkdir()
    for f in os.listdir(DEFAULT_TARGET):
        if f != "tokenizer_config.json":
            os.symlink(os.path.join(DEFAULT_TARGET, f), folder / f)
    cfg = json.loads(open(os.path.join(DEFAULT_TARGET, "tokenizer_config.json")).read())
    (folder / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": CHATML}))
    monkeypatch.setenv("SPECSCOPE_TARGET", str(folder))
    return str(folder)


@pytest.mark.parametrize("chat", ["auto", "on"])
def test_a_template_wraps_the_prompt_and_the_page_greys_it(chat, chat_embedded, target):
    run = None
    for _ in range(4):
        out = step(run, prompt=PROMPT, chat=chat, max_new_tokens=16)
        run = out["run"]
    assert any(template for _, template in run.prompt) and 'class="ss-prompt ss-template"' in out["text"]
    assert "&lt;|im_start|&gt;assistant" in out["text"]  # the template's own tokens, shown and escaped
    data = h.export_trace(run)[1]
    assert data["config"]["chat"] == chat and data["chat_applied"] is True
    ids = prepare_prompt(run_tokenizer(chat_embedded), PROMPT, "on").ids
    assert list(run.snap.ids[:run.snap.prompt_len]) == ids  # exactly apply_chat_template's ids
    ar_ids = Session(target, build_method("ar"), ids, max_new_tokens=16).generate().output_ids
    report = Report()
    compare_tokens(target, ids, ar_ids, run.output_ids[:len(ar_ids)], "talon on the templated prompt", report)
    assert_equivalent(report)


def run_tokenizer(folder: str):
    from core.model.loading import load_model
    return load_model(folder, "cpu").tokenizer


def test_off_and_a_tokenizer_without_a_template_leave_the_prompt_raw(chat_embedded):
    run = step(None, prompt=PROMPT, chat="off")["run"]
    assert not any(template for _, template in run.prompt) and h.export_trace(run)[1]["chat_applied"] is False
    sb = sb_step(None, prompt=PROMPT, chat="auto")["run"]
    assert sb.traces and any(template for _, template in sb.prompt)  # SpecBound takes the template too


def test_on_without_a_template_is_one_line():
    with pytest.raises(gr.Error) as err:
        step(None, prompt=PROMPT, chat="on")  # the embedded tokenizer has no template
    assert "template" in err.value.message and "\n" not in err.value.message
    run = step(None, prompt=PROMPT, chat="auto")["run"]  # auto: nothing to apply, the prompt stays raw
    assert run.prompt == [(run.prompt_text(), False)]
