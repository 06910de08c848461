"""Reading prompt files: JSON lines {"id": ..., "prompt": ...}, validated up front with one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

ASSET_PROMPTS = Path(__file__).resolve().parent.parent / "assets" / "prompts" / "heldout.jsonl"


class PromptFileError(ValueError):
    pass


def read_prompts(path: str | Path) -> list[dict]:
    path = Path(path)
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
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise PromptFileError(f'{path}:{n}: expected an object with a string "prompt"')
        if not row["prompt"].strip():
            raise PromptFileError(f"{path}:{n}: the prompt is empty")
        row.setdefault("id", n)
        out.append(row)
    if not out:
        raise PromptFileError(f"{path}: no prompts")
    return out
