"""What the engine's programs share: one-line errors, the decoding options of generate and bench."""
from __future__ import annotations

import argparse
import sys

from core.device import pick_device
from core.drafter_loading import DEFAULT_DRAFTER
from core.drafters import DRAFTERS
from core.loading import DEFAULT_TARGET
from core.presets import PRESETS, preset_knobs


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
