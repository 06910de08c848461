"""Generate with one method over a JSONL prompt file; one JSON line per prompt on stdout.

    python -m core.generate --method chain --prompts assets/prompts/heldout.jsonl --gamma 5

Bad input (files, knobs, models, devices, prompts too long) is found before anything runs: status 2 and a
one-line message. A prompt that fails while running writes one JSON line with an `error` field and the
others still run (then status 1), so finished work is never lost; every line is written whole.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from core.drafter_loading import DEFAULT_DRAFTER, HeadLoadError, drafter_factory
from core.drafters import DRAFTERS
from core.engine import Session
from core.loading import DEFAULT_TARGET, ModelLoadError, load_model
from core.methods import METHODS, build_method
from core.presets import PRESETS, preset_knobs
from core.prompts import check_prompt_chars, max_prompt_chars, read_prompts
from core.sampling import SamplingConfig
from core.train_utils import pick_device


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        fail(message)


def fail(message: str, status: int = 2) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(status)


def device_arg(name: str) -> str:
    """argparse type for --device: checked up front, one line when it cannot work here."""
    try:
        pick_device(name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name


def add_common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--prompts", required=True, help="JSON lines with {\"id\": ..., \"prompt\": ...}")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gamma", type=int, default=5, help="chain: drafted tokens per step")
    tree = ap.add_argument_group("trees (static, talon); N counts drafted nodes, not the root; "
                                 "unset knobs come from --preset")
    tree.add_argument("--preset", default="paper", choices=sorted(PRESETS),
                      help="paper: N=60 K=10 mu=0.03 k=1 D=8; embedded: best measured for the embedded pair")
    tree.add_argument("--N", type=int, default=None, help="node budget")
    tree.add_argument("--K", type=int, default=None, help="width: Top-K children (root Top-K for TALON)")
    tree.add_argument("--mu", type=float, default=None, help="TALON gate: keep p(u) >= mu * m_d")
    tree.add_argument("--k-init", type=int, default=None, help="TALON: leading levels forced to Top-K")
    tree.add_argument("--depth", type=int, default=None, help="static: depth D (delta = D + 1)")
    tree.add_argument("--shape-temperature", type=float, default=None,
                      help="trees see softmax(z / T_shape) of the drafter's logits (ours, not the papers'; "
                           "verification is untouched, so still lossless); default 1")
    sb = ap.add_argument_group("specbound (defaults: the method's own)")
    sb.add_argument("--alpha", type=float, default=None, help="ACT: T_l = 1 + alpha (1 - l/L)")
    sb.add_argument("--tau-exit", type=float, default=None, help="exit when annealed confidence >= tau_exit")
    sb.add_argument("--d-max", type=int, default=None, help="stop drafting when a token reaches d_max layers")
    sb.add_argument("--w-max", type=int, default=None, help="stop drafting after w_max tokens")
    sb.add_argument("--min-exit-layer", type=int, default=None, help="first layer allowed to exit")
    sb.add_argument("--exit-layers", default=None, help="layers with an exit check, e.g. 2,4 (default: every "
                                                        "layer from --min-exit-layer to --d-max)")
    ap.add_argument("--model", default=DEFAULT_TARGET, help="target: local folder or Hub id (default: embedded)")
    ap.add_argument("--drafter", default=DEFAULT_DRAFTER, choices=DRAFTERS,
                    help=f"chain / static / talon: where q comes from (default: {DEFAULT_DRAFTER}, "
                         "the best measured on the embedded target)")
    ap.add_argument("--draft", default=None, help="the drafter's weights: a draft LM (model) or an EAGLE-3 head "
                                                  "folder (eagle3); local folder or Hub id (default: embedded)")
    ap.add_argument("--device", default="auto", type=device_arg, help="auto | cpu | cuda | cuda:N")


def method_knobs(args: argparse.Namespace) -> dict:
    """Every method knob the user gave (SpecBound's unset ones are left to the method's defaults)."""
    names = ("gamma", "N", "K", "mu", "k_init", "depth", "shape_temperature", "alpha", "tau_exit", "d_max", "w_max",
             "min_exit_layer", "exit_layers")
    given = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    return {**preset_knobs(args.preset), **given}


def result_row(row: dict, res) -> dict:
    return {
        "id": row["id"], "method": res.method, "output_ids": res.output_ids, "text": res.text,
        "steps": res.steps, "mat": res.mat, "mean_delta": res.mean_delta,
        "target_forwards": res.target_forwards, "draft_forwards": res.draft_forwards,
        "wall_s": res.wall_s, "stop_reason": res.stop_reason, "prompt_tokens": len(res.prompt_ids),
        "drafter": next((t.drafter for t in res.traces if t.drafter), None),
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


def prepare(args: argparse.Namespace) -> tuple[list[dict], list[Session]]:
    """Everything that can be checked before running: raises ValueError / ModelLoadError with one line."""
    sampling = SamplingConfig(args.temperature, args.top_p, args.seed)
    sampling.validate()
    method = build_method(args.method, **method_knobs(args))
    rows = read_prompts(args.prompts)
    target = load_model(args.model, args.device)
    make = drafter_factory(args.drafter, target, args.draft, args.device) if method.needs_draft else lambda: None
    limit = max_prompt_chars(target.max_context)
    sessions = []
    for n, r in enumerate(rows, start=1):
        try:
            check_prompt_chars(r["prompt"], limit)
            sessions.append(Session(target, method, r["prompt"], sampling, args.max_new_tokens, make()))
        except ValueError as exc:  # SessionError included: name the prompt, the file may hold hundreds
            raise ValueError(f"prompt {n} (id {r['id']!r}): {exc}") from None
    return rows, sessions


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", required=True, choices=METHODS)
    add_common_args(ap)
    args = ap.parse_args(argv)
    try:
        rows, sessions = prepare(args)
    except (ValueError, ModelLoadError, HeadLoadError) as exc:
        fail(str(exc))
    failed = 0
    for row in rows:
        session = sessions.pop(0)  # released after its line: finished sessions' caches are not kept
        try:
            data = result_row(row, session.generate())
        except Exception as exc:  # noqa: BLE001 - one prompt's failure must not lose the others' lines
            failed += 1
            data = error_row(row, args.method, exc)
        write_line(data)
    if failed:
        fail(f"{failed} of {len(rows)} prompts failed; their lines carry an 'error' field", status=1)


if __name__ == "__main__":
    main()
