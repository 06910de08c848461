"""What greedy equality looks like in a given dtype and device: chain, TALON and SpecBound against AR on the
embedded pair (or any target and drafter), with the target's top-2 logit gap wherever a run parts from AR.

    python scripts/dtype_equality.py --device cuda --dtype bf16      # scripts/device_check.sh runs this too
    OMP_NUM_THREADS=1 python scripts/dtype_equality.py --device cpu --dtype bf16 --prompts 40
    python scripts/dtype_equality.py --device cuda --dtype bf16 --model Qwen/Qwen3-1.7B --drafter eagle3 \
        --draft AngelSlim/Qwen3-1.7B_eagle3 --chat on --prompt-file assets/prompts/chat.jsonl --methods chain,static,talon

A near-tie is a first difference where the gap is at most --eps; above it would be a real bug. In bf16 the
logits themselves are rounded to 8 bits of mantissa, so ties (gap 0) and one-step gaps are expected.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.drafter_registry import DRAFTERS  # noqa: E402
from core.drafter_registry import HeadLoadError, drafter_factory  # noqa: E402
import core.lossless_check as eq  # noqa: E402
from core.methods import build_method  # noqa: E402
from core.model.chat import CHAT_MODES, prepare_prompt  # noqa: E402
from core.model.loading import DEFAULT_DRAFT, DEFAULT_TARGET, ModelLoadError, load_model  # noqa: E402
from core.prompts import ASSET_PROMPTS, read_prompts  # noqa: E402

KNOBS = {"chain": {"gamma": 5}, "static": {"N": 16, "K": 4, "depth": 4},
         "talon": {"N": 16, "K": 4, "mu": 0.05, "k_init": 1}, "specbound": {}}


def drafts(args):
    """A fresh drafter per session: the draft LM in the run's dtype (as before), or the named drafter's factory
    (an EAGLE-3 head follows the target's device and dtype)."""
    target = load_model(args.model, args.device, args.dtype)
    if args.drafter == "model":
        lm = load_model(args.draft or DEFAULT_DRAFT, args.device, args.dtype)
        return target, lambda: lm
    return target, drafter_factory(args.drafter, target, args.draft, args.device)



def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bf16", help="fp32 | bf16 | fp16")
    ap.add_argument("--prompts", type=int, default=40, help="held-out prompts used (of 40)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--eps", type=float, default=0.0625, help="near-tie threshold on the top-2 logit gap")
    ap.add_argument("--model", default=DEFAULT_TARGET, help="target: local folder or Hub id (default: embedded)")
    ap.add_argument("--drafter", default="model", choices=DRAFTERS, help="chain / static / talon's drafter")
    ap.add_argument("--draft", default=None, help="the drafter's weights (default: embedded)")
    ap.add_argument("--chat", default="auto", choices=CHAT_MODES, help="the target's chat template (core/model/chat.py)")
    ap.add_argument("--prompt-file", default=str(ASSET_PROMPTS), help="JSON lines {\"prompt\": ...}")
    ap.add_argument("--methods", default="chain,talon,specbound", help=f"of {', '.join(KNOBS)}")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        methods = [(m, build_method(m, **KNOBS.get(m, {}))) for m in args.methods.split(",")]
        target, make = drafts(args)
        prompts = [prepare_prompt(target.tokenizer, r["prompt"], args.chat).ids
                   for r in read_prompts(args.prompt_file)][: args.prompts]
    except (ValueError, ModelLoadError, HeadLoadError) as exc:  # ChatError is a ValueError
        raise SystemExit(f"error: {exc}") from None
    eq.EPS = args.eps
    report = eq.check_greedy_equivalence(target, make, prompts, methods, args.max_new_tokens)
    parted = report.near_ties + report.failures
    gaps = sorted({line.rsplit(" ", 1)[-1] for line in parted})
    print(f"{args.dtype} on {target.device}: {report.compared} greedy runs ({len(prompts)} prompts x "
          f"{args.max_new_tokens} tokens x {'/'.join(m for m, _ in methods)}, chat {args.chat}), "
          f"identical to AR: {report.compared - len(parted)}, "
          f"near-ties (gap <= {args.eps:g}): {len(report.near_ties)} "
          f"({len(report.near_ties) / max(1, report.compared):.1%}), failures: {len(report.failures)}; "
          f"gaps seen: {', '.join(gaps) or 'none'}; {time.perf_counter() - t0:.0f} s")
    for line in report.failures:
        print("   failure:", line)
    raise SystemExit(1 if report.failures else 0)


if __name__ == "__main__":
    main()
