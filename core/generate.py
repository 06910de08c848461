"""Generate with one method over a JSONL prompt file; one JSON line per prompt on stdout.

    python -m core.generate --method chain --prompts assets/prompts/heldout.jsonl --gamma 5

Bad input exits with status 2 and a one-line message naming the problem.
"""
from __future__ import annotations

import argparse
import json
import sys

from core.engine import Session, SessionError
from core.loading import DEFAULT_DRAFT, DEFAULT_TARGET, ModelLoadError, load_model
from core.methods import METHODS, build_method
from core.presets import PRESETS, preset_knobs
from core.prompts import PromptFileError, read_prompts
from core.sampling import SamplingConfig


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        fail(message)


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


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
    sb = ap.add_argument_group("specbound (defaults: the method's own)")
    sb.add_argument("--alpha", type=float, default=None, help="ACT: T_l = 1 + alpha (1 - l/L)")
    sb.add_argument("--tau-exit", type=float, default=None, help="exit when annealed confidence >= tau_exit")
    sb.add_argument("--d-max", type=int, default=None, help="stop drafting when a token reaches d_max layers")
    sb.add_argument("--w-max", type=int, default=None, help="stop drafting after w_max tokens")
    sb.add_argument("--min-exit-layer", type=int, default=None, help="first layer allowed to exit")
    ap.add_argument("--model", default=DEFAULT_TARGET, help="target: local folder or Hub id (default: embedded)")
    ap.add_argument("--draft", default=DEFAULT_DRAFT, help="draft model (default: embedded)")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")


def method_knobs(args: argparse.Namespace) -> dict:
    """Every method knob the user gave (SpecBound's unset ones are left to the method's defaults)."""
    names = ("gamma", "N", "K", "mu", "k_init", "depth", "alpha", "tau_exit", "d_max", "w_max", "min_exit_layer")
    given = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    return {**preset_knobs(args.preset), **given}


def result_row(row: dict, res) -> dict:
    return {
        "id": row["id"], "method": res.method, "output_ids": res.output_ids, "text": res.text,
        "steps": res.steps, "mat": res.mat, "mean_delta": res.mean_delta,
        "target_forwards": res.target_forwards, "draft_forwards": res.draft_forwards,
        "wall_s": res.wall_s, "stop_reason": res.stop_reason, "prompt_tokens": len(res.prompt_ids),
    }


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", required=True, choices=METHODS)
    add_common_args(ap)
    args = ap.parse_args(argv)
    sampling = SamplingConfig(args.temperature, args.top_p, args.seed)
    try:
        sampling.validate()
        method = build_method(args.method, **method_knobs(args))
        rows = read_prompts(args.prompts)
        target = load_model(args.model, args.device)
        draft = load_model(args.draft, args.device) if method.needs_draft else None
        sessions = [Session(target, method, r["prompt"], sampling, args.max_new_tokens, draft) for r in rows]
    except (ValueError, ModelLoadError) as exc:
        fail(str(exc))
    for row, session in zip(rows, sessions):
        print(json.dumps(result_row(row, session.generate())), flush=True)


if __name__ == "__main__":
    main()
