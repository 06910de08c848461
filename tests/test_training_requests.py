"""The requests SmolLM2's heads were trained on never include a request the real-model tables are measured on, and
the self-written ones start where a user's turn starts in the target's own template."""
import json
from pathlib import Path

import pytest

from cli.self_requests import keep, pre_query
from core.model.real_models import complete, model_dir

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ROOT / "assets" / "prompts"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (PROMPTS / name).read_text().splitlines() if line.strip()]


def norm(text: str) -> str:
    return " ".join(text.lower().split())


@pytest.mark.parametrize("name", ["train_chat.jsonl", "train_self.jsonl"])
def test_no_held_out_request_is_trained_on(name):
    train = rows(name)
    held = {norm(r["prompt"]) for r in rows("real.jsonl")}
    assert len(train) > 1000
    assert len({r["id"] for r in train}) == len(train)
    assert not held & {norm(r["prompt"]) for r in train}


def test_self_written_requests_are_distinct_and_closed():
    train = rows("train_self.jsonl")
    assert [r["id"] for r in train] == [f"self-{i}" for i in range(len(train))]
    prompts = [r["prompt"] for r in train]
    assert len(set(prompts)) == len(prompts)
    assert all(keep(p, True, 16, 400) for p in prompts)
    assert not keep("What is a hash map?", False, 16, 400)  # cut off at the token limit: not a request
    assert not keep("ok", True, 16, 400)


@pytest.mark.skipif(not complete(model_dir("smollm2")), reason="the real model is not fetched here")
def test_the_pre_query_is_the_template_up_to_the_users_words():
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir("smollm2"))
    pre = pre_query(tok)
    assert pre.endswith("<|im_start|>user\n") and "system" in pre
    full = tok.apply_chat_template([{"role": "user", "content": "Hi there"}], tokenize=False)
    assert full.startswith(pre + "Hi there")
