"""Chat templates (core/model/chat.py, --chat): the ids are exactly apply_chat_template(add_generation_prompt=True)'s,
off is the raw prompt, and every method still equals AR on templated prompts (greedy)."""
import copy
import json
import os

import pytest

from cli import bench, generate
from core.drafters.draft_lm import ModelDrafter
from core.lossless_check import assert_equivalent, check_greedy_equivalence
from core.methods import build_method
from core.model.causal_lm import CausalLM
from core.model.chat import ChatError, prepare_prompt, resolve_chat
from core.model.loading import DEFAULT_TARGET

# a small ChatML-like template (the embedded tokenizer has none), trimming the content as Llama 3's does
CHATML = ("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# one that reads enable_thinking the way Qwen3's does: an empty think block when thinking is off
THINKING = (CHATML + "{% if add_generation_prompt and enable_thinking is defined and enable_thinking is false %}"
            "<think>\n\n</think>\n\n{% endif %}")
PROMPT = "  def add(a, b):\n"


def with_template(tokenizer, template: str | None):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = template
    return tok


@pytest.fixture(scope="module")
def chat_target(target):
    """The embedded target (same weights, heads and exit heads) with a tokenizer that has a chat template."""
    return CausalLM(target.hf, with_template(target.tokenizer, CHATML), target.name)


def reference(tok, prompt, **kw):
    return tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                   tokenize=True, return_dict=False, **kw)


def test_auto_and_on_wrap_exactly_as_apply_chat_template_and_off_does_not(chat_target):
    tok = chat_target.tokenizer
    for mode in ("auto", "on"):
        got = prepare_prompt(tok, PROMPT, mode)
        assert got.chat and got.ids == reference(tok, PROMPT) and got.thinking is None
    off = prepare_prompt(tok, PROMPT, "off")
    assert not off.chat and off.ids == tok(PROMPT)["input_ids"] and off.text == PROMPT


def test_spans_separate_the_users_prompt_from_the_templates_text(chat_target):
    tok = chat_target.tokenizer
    got = prepare_prompt(tok, PROMPT, "on")
    a, b = got.prompt_chars
    assert got.text == tok.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                               tokenize=False)
    assert got.text[a:b] == PROMPT.strip()  # the template trims; the span is what it kept
    ta, tb = got.prompt_tokens
    assert tok.decode(got.ids[ta:tb]) == PROMPT.strip()
    mask = got.template_mask()
    assert len(mask) == len(got.ids) and not any(mask[ta:tb]) and all(mask[:ta]) and all(mask[tb:])
    assert tok.decode([t for t, m in zip(got.ids, mask) if m]).startswith(tok.bos_token + "<|im_start|>user")
    assert json.loads(json.dumps(got.to_dict()))["chat"] is True  # plain data for the page and exports


def test_a_raw_prompt_marks_only_what_the_tokenizer_added(target):
    got = prepare_prompt(target.tokenizer, PROMPT, "auto")  # the embedded tokenizer has no template
    assert not got.chat and got.ids == target.tokenizer(PROMPT)["input_ids"]
    ta, tb = got.prompt_tokens
    assert target.tokenizer.decode(got.ids[ta:tb]) == PROMPT and got.template_mask()[:ta] == [True] * ta


def test_enable_thinking_is_false_by_default_and_the_operator_can_turn_it_on(target, monkeypatch):
    tok = with_template(target.tokenizer, THINKING)
    monkeypatch.delenv("SPECSCOPE_CHAT_THINKING", raising=False)
    off = prepare_prompt(tok, PROMPT, "on")
    assert off.thinking is False and off.ids == reference(tok, PROMPT, enable_thinking=False)
    assert off.text.endswith("<think>\n\n</think>\n\n")
    monkeypatch.setenv("SPECSCOPE_CHAT_THINKING", "on")
    on = prepare_prompt(tok, PROMPT, "on")
    assert on.thinking is True and on.ids == reference(tok, PROMPT, enable_thinking=True) and "<think>" not in on.text
    assert prepare_prompt(tok, PROMPT, "on", thinking=False).ids == off.ids  # the argument wins over the env
    ta, tb = off.prompt_tokens
    assert tok.decode(off.ids[ta:tb]) == PROMPT.strip()


def test_on_without_a_template_and_bad_modes_are_one_line_errors(target):
    with pytest.raises(ChatError, match="no chat template"):
        resolve_chat("on", target.tokenizer)
    with pytest.raises(ChatError, match="unknown chat mode"):
        prepare_prompt(target.tokenizer, PROMPT, "maybe")
    assert resolve_chat("auto", target.tokenizer) is False and resolve_chat("off", target.tokenizer) is False
    broken = with_template(target.tokenizer, "{{ raise_exception('only system turns') }}")
    with pytest.raises(ChatError, match="could not render") as exc:
        prepare_prompt(broken, PROMPT, "on")
    assert "\n" not in str(exc.value)


METHODS = [(name, build_method(name, **knobs)) for name, knobs in [
    ("ar", {}), ("chain", {"gamma": 4}), ("static", {"N": 16, "K": 4, "depth": 4}),
    ("talon", {"N": 16, "K": 4, "mu": 0.05}), ("specbound", {})]]


@pytest.mark.parametrize("mode", ["on", "off"])
def test_every_method_equals_ar_on_chat_and_raw_prompts(chat_target, draft, heldout_prompts, mode):
    prompts = [prepare_prompt(chat_target.tokenizer, p, mode).ids for p in heldout_prompts[:3]]
    assert all(ids[0] == chat_target.tokenizer.bos_token_id for ids in prompts)
    report = check_greedy_equivalence(chat_target, lambda: ModelDrafter(draft), prompts, METHODS, max_new_tokens=24)
    assert report.compared == 3 * len(METHODS)
    assert_equivalent(report)


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory):
    """A copy of the embedded target's folder (weights linked) whose tokenizer has a chat template."""
    folder = tmp_path_factory.mktemp("chat-target")
    for f in os.listdir(DEFAULT_TARGET):
        if f != "tokenizer_config.json":
            os.symlink(os.path.join(DEFAULT_TARGET, f), folder / f)
    with open(os.path.join(DEFAULT_TARGET, "tokenizer_config.json")) as fh:
        config = json.load(fh)
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": CHATML}))
    return folder


@pytest.fixture
def prompt_file(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "f", "prompt": PROMPT}) + "\n")
    return str(path)


def generate_rows(capsys, *args):
    generate.main(["--method", "chain", "--max-new-tokens", "6", "--drafter", "lookup", *args])
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_cli_generate_records_chat_and_wraps_only_when_asked(chat_folder, prompt_file, capsys):
    on = generate_rows(capsys, "--prompts", prompt_file, "--model", str(chat_folder))  # auto: a template
    off = generate_rows(capsys, "--prompts", prompt_file, "--model", str(chat_folder), "--chat", "off")
    raw = generate_rows(capsys, "--prompts", prompt_file)  # the embedded target: no template, auto is off
    assert on[0]["chat"] is True and off[0]["chat"] is False and raw[0]["chat"] is False
    assert on[0]["prompt_tokens"] > off[0]["prompt_tokens"] == raw[0]["prompt_tokens"]
    assert off[0]["output_ids"] == raw[0]["output_ids"]  # same weights, same raw prompt


def test_cli_chat_on_without_a_template_is_one_line_and_status_2(prompt_file, capsys):
    for main, args in ((generate.main, ["--method", "ar"]), (bench.main, ["--methods", "ar"])):
        with pytest.raises(SystemExit) as exc:
            main([*args, "--prompts", prompt_file, "--chat", "on", "--max-new-tokens", "2"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and "--chat on" in err


def test_cli_bench_records_chat(chat_folder, prompt_file, capsys):
    bench.main(["--prompts", prompt_file, "--model", str(chat_folder), "--methods", "ar,chain@lookup",
                "--max-new-tokens", "4", "--limit", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["chat"] is True and all(r["chat"] is True and r["mismatches"] == 0 for r in out["rows"])
