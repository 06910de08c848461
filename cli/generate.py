"""Generate with one method over a JSONL prompt file; one JSON line per prompt on stdout.

    python -m cli.generate --method chain --prompts assets/prompts/heldout.jsonl --gamma 5

Bad input (files, knobs, models, devices, prompts too long) is found before anything runs: status 2 and a
one-line message. A prompt that fails while running writes one JSON line with an `error` field and the
others still run (then status 1), so finished work is never lost; every line is written whole.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from cli.common import (OneLineParser, add_common_args, announce_drafters, drafter_knobs, fail, method_knobs,
                        run_main)
from core.auto.budget import AutoMemory
from core.auto.cost_model import measure_costs
from core.drafter_registry import HeadLoadError, drafter_factory
from core.engine import Session
from core.methods import METHODS, build_method
from core.model.chat import ChatError, prepare_prompt, resolve_chat
from core.model.loading import ModelLoadError, load_model
from core.prompts import check_prompt_chars, max_prompt_chars, read_prompts
from core.sampling import SamplingConfig


def result_row(row: dict, res, chat: bool = False) -> dict:
    return {
        "id": row["id"], "method": res.method, "output_ids": res.output_ids, "text": res.text,
        "steps": res.steps, "mat": res.mat, "mean_delta": res.mean_delta,
        "target_forwards": res.target_forwards, "draft_forwards": res.draft_forwards,
        "wall_s": res.wall_s, "stop_reason": res.stop_reason, "prompt_tokens": len(res.prompt_ids),
        "drafter": next((t.drafter for t in res.traces if t.drafter), None), "chat": chat,
    }


def error_row(row: dict, method: str, exc: BaseException) -> dict:
    first = (str(exc).strip().splitlines() or [""])[0]
    return {"id": row["id"], "method": method, "error": f"{type(exc).__name__}: {first}" if first else type(exc).__name__}


def write_line(data: dict) -> None:
    """One whole line per write, flushed, so a reader never sees half a record. A reader that went away
    (`| head -1`) ends the run quietly instead of with a traceback."""
    try:
        sys.stdout.write(json.dumps(data) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        raise SystemExit(1) from None


def prepare(args: argparse.Namespace) -> tuple[list[dict], list[Session], bool]:
    """Everything that can be checked before running: raises ValueError / ModelLoadError with one line.
    Returns the rows, their sessions and whether the chat template wraps the prompts."""
    sampling = SamplingConfig(args.temperature, args.top_p, args.seed)
    sampling.validate()
    # auto: each prompt's session carries on where the last one rested (one memory for the run)
    method = build_method(args.method, **method_knobs(args), auto_memory=AutoMemory())
    rows = read_prompts(args.prompts)
    target = load_model(args.model, args.device, args.dtype)
    make = drafter_factory(args.drafter, target, args.draft, args.device, drafter_knobs(args)) if method.needs_draft else lambda: None
    chat = resolve_chat(args.chat, target.tokenizer)
    if getattr(method, "auto", False):  # the cost curves before any prompt is timed, saying so
        measure_costs(target, make(), progress=lambda line: print(line, file=sys.stderr, flush=True))
    limit = max_prompt_chars(target.max_context)
    sessions = []
    for n, r in enumerate(rows, start=1):
        try:
            check_prompt_chars(r["prompt"], limit)
            ids = prepare_prompt(target.tokenizer, r["prompt"], args.chat).ids
            sessions.append(Session(target, method, ids, sampling, args.max_new_tokens, make()))
        except ValueError as exc:  # SessionError and ChatError included: name the prompt, the file may hold hundreds
            raise ValueError(f"prompt {n} (id {r['id']!r}): {exc}") from None
    announce_drafters({args.drafter: make} if method.needs_draft else {})  # only once nothing can fail here
    return rows, sessions, chat


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", required=True, choices=METHODS)
    add_common_args(ap)
    args = ap.parse_args(argv)
    try:
        rows, sessions, chat = prepare(args)
    except ChatError as exc:
        fail(f"--chat {args.chat}: {exc}")
    except (ValueError, ModelLoadError, HeadLoadError) as exc:
        fail(str(exc))
    failed = 0
    for row in rows:
        session = sessions.pop(0)  # released after its line: finished sessions' caches are not kept
        try:
            data = result_row(row, session.generate(), chat)
        except Exception as exc:  # noqa: BLE001 - one prompt's failure must not lose the others' lines
            failed += 1
            data = error_row(row, args.method, exc)
        write_line(data)
    if failed:
        fail(f"{failed} of {len(rows)} prompts failed; their lines carry an 'error' field", status=1)


if __name__ == "__main__":
    run_main(main)
