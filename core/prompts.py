"""Reading prompt files: JSON lines {"id": ..., "prompt": ...}, validated up front with one-line errors."""
from __future__ import annotations

import json
import os
from pathlib import Path

ASSET_PROMPTS = Path(__file__).resolve().parent.parent / "assets" / "prompts" / "heldout.jsonl"


CHARS_PER_TOKEN_BOUND = 32  # a prompt longer than this many characters per context token cannot fit any context


class PromptFileError(ValueError):
    pass


def max_prompt_chars(max_context: int = 1024) -> int:
    """SPECSCOPE_MAX_PROMPT_CHARS, else 32 characters per context token. Checked before tokenizing: a
    5 MB prompt otherwise costs the tokenizer tens of seconds and hundreds of MB only to be refused."""
    env = os.environ.get("SPECSCOPE_MAX_PROMPT_CHARS", "").strip()
    return int(env) if env.isdigit() else CHARS_PER_TOKEN_BOUND * max_context


def check_prompt_chars(prompt: str, limit: int) -> None:
    if len(prompt) > limit:
        raise ValueError(f"the prompt is {len(prompt):,} characters; the limit is {limit:,} "
                         "(it could not fit the model's context)")


def read_prompts(path: str | Path) -> list[dict]:
    path = Path(path)
    if path.is_dir():
        raise PromptFileError(f"{path} is a folder; --prompts takes a JSON-lines file")
    if not path.is_file():
        raise PromptFileError(f"prompts file not found: {path}")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PromptFileError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise PromptFileError(f"{path}:{n}: JSON nested too deeply for a prompt line") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise PromptFileError(f'{path}:{n}: expected an object with a string "prompt"')
        if not row["prompt"].strip():
            raise PromptFileError(f"{path}:{n}: the prompt is empty")
        row.setdefault("id", n)
        out.append(row)
    if not out:
        raise PromptFileError(f"{path}: no prompts")
    return out
