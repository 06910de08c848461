"""Summarise `cli.generate` outputs: MAT, δ, tokens/s and speed-up over the first file, and whether the
generated ids equal the first file's (greedy runs of a lossless method must).

    python -m cli.generate --method ar --prompts P.jsonl > ar.jsonl
    python -m cli.generate --method chain --prompts P.jsonl > chain.jsonl
    python -m cli.summarize ar.jsonl chain.jsonl

For timings measured side by side (methods interleaved prompt by prompt) use `python -m cli.bench`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.metrics import Totals, speedup  # the same totals and ratios as the bench's rows
from cli.common import run_main


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarise(rows: list[dict]) -> Totals:
    return Totals(tokens=sum(len(r["output_ids"]) for r in rows), steps=sum(r["steps"] for r in rows),
                  draft_forwards=sum(r["draft_forwards"] for r in rows), wall_s=sum(r["wall_s"] for r in rows))


def differing(base: list[dict], rows: list[dict]) -> int:
    """Prompts (matched by id) whose generated ids differ from the baseline's."""
    ref = {r["id"]: r["output_ids"] for r in base}
    return sum(1 for r in rows if r["id"] in ref and ref[r["id"]] != r["output_ids"])


def table(files: list[Path]) -> str:
    runs = [read_rows(f) for f in files]
    base = summarise(runs[0])
    lines = ["| method | prompts | MAT | mean δ | tok/s | speed-up | ≠ first |", "|---|---|---|---|---|---|---|"]
    for rows in runs:
        s = summarise(rows)
        label = rows[0]["method"] if rows else "?"
        lines.append(f"| {label} | {len(rows)} | {s.mat:.2f} | {s.mean_delta:.2f} | {s.tok_s:.1f} | "
                     f"{speedup(1 / max(1e-9, base.tok_s), 1 / max(1e-9, s.tok_s)):.2f}× | {differing(runs[0], rows)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="JSON-lines outputs of cli.generate; the first is the baseline")
    args = ap.parse_args(argv)
    try:
        print(table(args.files))
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: cannot summarise {', '.join(map(str, args.files))}: {exc!r}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    run_main(main)
