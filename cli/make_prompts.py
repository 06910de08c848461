"""Write assets/prompts/heldout.jsonl: code prompts cut from held-out stdlib files (never trained on).

    python -m cli.make_prompts --per-file 2 --out assets/prompts/heldout.jsonl

Each prompt is a function's `def` line plus its docstring when it has one, so a model must
continue with the body (a newline and the indent are its first token). Deterministic: files and functions are taken in sorted order.
"""
from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

from cli.corpus import source_files, split
from core.prompts import ASSET_PROMPTS
from cli.common import run_main


def function_prompts(source: str, limit: int) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines(keepends=True)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or not node.body or node.col_offset > 4:
            continue
        body = node.body[0]
        has_doc = isinstance(body, ast.Expr) and isinstance(getattr(body, "value", None), ast.Constant) \
            and isinstance(body.value.value, str)
        end = body.end_lineno if has_doc and len(node.body) > 1 else body.lineno - 1
        text = "".join(lines[node.lineno - 1 : end])
        if 40 <= len(text) <= 1200 and len(node.body) > 1:
            out.append(text.rstrip())  # end on a visible character: BPE merges "\n" with the indent after it
        if len(out) >= limit:
            break
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-file", type=int, default=2)
    ap.add_argument("--out", default=str(ASSET_PROMPTS))
    args = ap.parse_args(argv)
    _, heldout = split(source_files())
    rows = []
    for f in heldout:
        for i, prompt in enumerate(function_prompts(f.read(), args.per_file)):
            rows.append({"id": f"{f.relpath}#{i}", "prompt": prompt})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} prompts from {len(heldout)} held-out files to {args.out}")


if __name__ == "__main__":
    run_main(main)
