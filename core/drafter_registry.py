"""Name -> a factory of fresh drafters (one per session) with their shared read-only weights loaded once.

    model   the separate draft LM (`--draft` folder or Hub id; default: the embedded draft)
    eagle3  an EAGLE-3 head in any published layout (core/eagle3/dialects.py; `--draft` folder or Hub id;
            default: the embedded head)
    lookup  prompt lookup: no weights at all
    self    the target's own first ℓ_self layers and its exit head there (knob self_layer): any model drafts

Every drafter that runs a model also takes the knob lookup_mix, which wraps it in core/drafters/lookup_mix.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from core import knobs
from core.drafters.contract import Drafter
from core.drafters.draft_lm import ModelDrafter
from core.drafters.lookup import LookupDrafter
from core.drafters.lookup_mix import LookupMix
from core.eagle3.loading import DEFAULT_HEAD, HeadLoadError, head_for
from core.model.causal_lm import CausalLM
from core.model.loading import DEFAULT_DRAFT, ModelLoadError, denied_line, hub_offline, hub_reachable, load_model
from core.model.real_models import heads_dir, real_model_of

DrafterFactory = Callable[[], Drafter]
# the best drafter measured for the embedded target (docs/bench/, drafters); the draft LM where no head ships
DEFAULT_DRAFTER = "eagle3" if (DEFAULT_HEAD / "config.json").exists() else "model"  # = offered_drafters()[0]


def default_head(target: CausalLM) -> Path:
    """The head trained here for this target: a real model's own (assets/models/<name>/eagle3), else the
    embedded one (which fits the embedded target only; head_for says so for any other)."""
    real = real_model_of(target.name)
    own = heads_dir(real.name) / "eagle3" if real is not None else None
    return own if own is not None and (own / "config.json").is_file() else DEFAULT_HEAD


def head_folder(name: str) -> Path:
    """A local folder, else a Hub id fetched into (or found in) the local Hugging Face cache."""
    path = Path(name).expanduser()
    if path.exists() or name.count("/") != 1 or name.startswith((".", "/", "~")):
        return path
    from huggingface_hub import snapshot_download
    offline = hub_offline() or not hub_reachable()
    try:
        return Path(snapshot_download(name, allow_patterns=["config.json", "*.safetensors", "pytorch_model.bin"],
                                      local_files_only=offline))
    except Exception as exc:  # noqa: BLE001 - the hub client raises many kinds; the user needs one line
        where = "the local Hugging Face cache (offline)" if offline else "the Hub"
        denied = None if offline else denied_line(name, exc)
        raise HeadLoadError(denied or f"cannot fetch the head '{name}' from {where}: {type(exc).__name__}") from None


def _model(target: CausalLM, weights: str | None, device: str, options: dict) -> DrafterFactory:
    lm = load_model(weights or DEFAULT_DRAFT, device)
    if len(lm.tokenizer) != len(target.tokenizer):
        raise ModelLoadError(f"the draft '{lm.name}' and the target have different tokenizers; pick a draft from "
                             f"the target's family")
    return lambda: ModelDrafter(lm)


def _eagle3(target: CausalLM, weights: str | None, device: str, options: dict) -> DrafterFactory:
    from core.eagle3.drafter import EagleDrafter
    from core.eagle3.int8_scores import use_int8
    head = head_for(target, head_folder(weights) if weights else default_head(target))
    use_int8(options["head_int8"], head.lm_head)  # a bad head_int8 says so now, not in the first session
    return lambda: EagleDrafter(head, target, options["head_int8"])


def _lookup(target: CausalLM, weights: str | None, device: str, options: dict) -> DrafterFactory:
    return lambda: LookupDrafter(target.vocab_size)


def _self(target: CausalLM, weights: str | None, device: str, options: dict) -> DrafterFactory:
    """The per-layer head at ℓ_self when the target has trained ones, else its shared heads or logit lens."""
    from core.model.exit_heads import heads_for
    from core.drafters.self_drafter import SelfDrafter, check_self_layer
    layer = check_self_layer(options["self_layer"], target.num_layers)
    heads = heads_for(target)
    return lambda: SelfDrafter(target, heads, layer)


@dataclass(frozen=True)
class DrafterSpec:
    """A drafter, declared once: its name (CLI `--drafter`, share links, traces), the page's label, how to build
    a factory of fresh drafters for a target (weights: a folder or Hub id, None for the default), and whether
    this build can offer it (the EAGLE-3 head only when it ships)."""
    name: str
    label: str
    build: Callable[[CausalLM, str | None, str, dict], DrafterFactory]  # options: its knobs (knobs.DRAFTER_KNOBS)
    available: Callable[[], bool] = lambda: True


REGISTRY: dict[str, DrafterSpec] = {spec.name: spec for spec in (
    DrafterSpec("eagle3", "eagle3 (head on the target's features)", _eagle3,
                lambda: (DEFAULT_HEAD / "config.json").exists()),
    DrafterSpec("model", "model (1-layer draft LM)", _model),
    DrafterSpec("lookup", "lookup (n-gram in the text)", _lookup),
    DrafterSpec("self", "self (the target's own first layers)", _self),
)}
DRAFTERS = tuple(REGISTRY)


def offered_drafters() -> list[str]:
    """The drafters this build can offer, in declaration order (the page's radio, the share link's check)."""
    return [name for name, spec in REGISTRY.items() if spec.available()]


def drafter_factory(name: str, target: CausalLM, draft: str | None = None, device: str = "auto",
                    options: dict | None = None) -> DrafterFactory:
    """options: the drafter's knobs (knobs.DRAFTER_KNOBS; defaults where missing). Raises ValueError (unknown
    name, a bad knob), ModelLoadError or HeadLoadError with a one-line message."""
    if name not in REGISTRY:
        raise ValueError(f"unknown drafter '{name}' (choose from {', '.join(REGISTRY)})")
    opts = knobs.drafter_options(name, options or {})
    mix = knobs.LOOKUP_MIX.check(opts.pop(knobs.LOOKUP_MIX.name, 0.0))
    factory = REGISTRY[name].build(target, draft, device, opts)
    if not mix:
        return factory
    return lambda: LookupMix(factory(), target.vocab_size, mix)


__all__ = ["DEFAULT_DRAFTER", "DRAFTERS", "DrafterFactory", "drafter_factory", "HeadLoadError", "ModelLoadError"]
