"""What the engine's programs share: one-line errors, the decoding options of generate and bench."""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from core import knobs
from core.drafter_registry import DEFAULT_DRAFTER, DRAFTERS, DrafterFactory
from core.knobs import Knob
from core.model.chat import CHAT_MODES
from core.model.device import pick_device
from core.model.loading import DEFAULT_TARGET, DTYPE_CHOICES
from core.model.real_models import REAL_MODELS


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        fail(message)


def fail(message: str, status: int = 2) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(status)


def run_main(main: Callable[[], None]) -> None:
    """A program's entry point: Ctrl-C ends it with one line and status 130, not a traceback (every line
    written so far is whole: lines are written at once)."""
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None


def announce_drafters(factories: dict[str, DrafterFactory]) -> None:
    """One stderr line per drafter that reads a published head: its layout, taps and the rule that chose
    them, draft vocabulary and variants (a wrong tap set fails silently, so say which one is in use)."""
    for name, make in factories.items():
        info = getattr(make(), "info", None)
        if info is not None:
            print(f"drafter {name}: {info.line()}", file=sys.stderr)


def device_arg(name: str) -> str:
    """argparse type for --device: checked up front, one line when it cannot work here."""
    try:
        pick_device(name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name


def _knob_flags(group, ks: tuple[Knob, ...], seen: set[str]) -> None:
    """One flag per declared knob (core/knobs.py); unset (None) leaves the preset's or the method's default."""
    for k in ks:
        if k.on_cli and k.name not in seen:
            seen.add(k.name)
            # integers parse as numbers: the knob's own check (core/knobs.py) says what is wrong and the range
            group.add_argument(k.flag, type=float if k.integer else k.kind, default=None, dest=k.name,
                               help=f"{k.label}: {k.help} (default {k.default}; range {k.range_text()})")


def add_common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--prompts", required=True, help="JSON lines with {\"id\": ..., \"prompt\": ...}")
    for k in knobs.SAMPLING_KNOBS:
        ap.add_argument(k.flag, type=k.kind, default=k.default, dest=k.name, help=f"{k.help} (default {k.default})")
    seen: set[str] = set()
    _knob_flags(ap.add_argument_group("chain"), knobs.METHOD_KNOBS["chain"], seen)
    tree = ap.add_argument_group("trees (static, talon); N counts drafted nodes, not the root; "
                                 "unset knobs come from --preset")
    ap.add_argument("--preset", default="paper", choices=sorted(knobs.PRESETS),
                    help="named knob settings; a preset sets the knobs it names, the others keep their defaults. "
                         + "; ".join(f"{name}: {knobs.preset_text(name)}" for name in ("embedded", "auto", "fast"))
                         + " (paper: every method at the papers' settings, SpecBound checking every layer over the "
                           "whole vocabulary; embedded: the best tree measured on the embedded pair; auto: N chosen "
                           "per step for this machine; fast: SpecBound at the exit layers stored with its heads over "
                           "a reduced vocabulary)")
    _knob_flags(tree, knobs.METHOD_KNOBS["talon"] + knobs.METHOD_KNOBS["static"], seen)
    _knob_flags(ap.add_argument_group("specbound; unset knobs come from --preset (paper or fast)"),
                knobs.METHOD_KNOBS["specbound"], seen)
    ap.add_argument("--model", default=DEFAULT_TARGET, help="target: local folder, Hub id, or a real model fetched at "
                    f"install time by its name ({', '.join(REAL_MODELS)}: python -m cli.get_model NAME); default: embedded")
    ap.add_argument("--dtype", default="auto", choices=DTYPE_CHOICES,
                    help="the target's precision: auto = bf16 on a GPU or a CPU with bf16 matrix units (AVX512-BF16 / "
                         "AMX), fp32 elsewhere (SPECSCOPE_DTYPE overrides auto); every method is compared with AR in "
                         "the same precision")
    ap.add_argument("--drafter", default=DEFAULT_DRAFTER, choices=DRAFTERS,
                    help=f"chain / static / talon: where q comes from (default: {DEFAULT_DRAFTER}, "
                         "the best measured on the embedded target)")
    add_drafter_knob_flags(ap, seen)
    ap.add_argument("--draft", default=None, help="the drafter's weights: a draft LM (model) or an EAGLE-3 head "
                                                  "folder (eagle3); local folder or Hub id (default: embedded)")
    ap.add_argument("--device", default="auto", type=device_arg, help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--chat", default="auto", choices=CHAT_MODES,
                    help="wrap each prompt as one user turn in the target's chat template (add_generation_prompt, "
                         "no system prompt, enable_thinking off unless SPECSCOPE_CHAT_THINKING=on); auto: when "
                         "the tokenizer has a template (default auto)")


def add_drafter_knob_flags(ap: argparse.ArgumentParser, seen: set[str] | None = None) -> None:
    """Every drafter's own knobs, each flag once: several drafters share one (lookup_mix)."""
    _knob_flags(ap.add_argument_group("the drafter's own knobs"), sum(knobs.DRAFTER_KNOBS.values(), ()),
                set() if seen is None else seen)


def drafter_knobs(args: argparse.Namespace) -> dict:
    """The drafter's own knobs the user gave (knobs.DRAFTER_KNOBS), for drafter_factory."""
    return {k.name: getattr(args, k.name) for k in knobs.DRAFTER_KNOBS.get(args.drafter, ())
            if getattr(args, k.name, None) is not None}


def method_knobs(args: argparse.Namespace) -> dict:
    """Every method knob the user gave and the preset (core.knobs.resolve puts the given over the preset's)."""
    knobs.preset_knobs(args.preset)  # an unknown preset fails here, in one line
    given = {n: getattr(args, n) for n in knobs.ALL_KNOBS if getattr(args, n, None) is not None}
    return {"preset": args.preset, **given}
