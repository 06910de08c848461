"""Name -> a factory of fresh drafters (one per session) with their shared read-only weights loaded once.

    model   the separate draft LM (`--draft` folder or Hub id; default: the embedded draft)
    eagle3  an EAGLE-3 head in any published layout (core/eagle3_dialects.py; `--draft` folder or Hub id;
            default: the embedded head)
    lookup  prompt lookup: no weights at all
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from core.drafters import DRAFTERS, Drafter, LookupDrafter, ModelDrafter
from core.eagle3_io import DEFAULT_HEAD, HeadLoadError, head_for
from core.loading import DEFAULT_DRAFT, ModelLoadError, denied_line, hub_offline, hub_reachable, load_model
from core.model import CausalLM

DrafterFactory = Callable[[], Drafter]
# the best drafter measured for the embedded target (README's drafter table); the draft LM where no head ships
DEFAULT_DRAFTER = "eagle3" if (DEFAULT_HEAD / "config.json").exists() else "model"


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


def drafter_factory(name: str, target: CausalLM, draft: str | None = None, device: str = "auto") -> DrafterFactory:
    """Raises ValueError (unknown name), ModelLoadError or HeadLoadError with a one-line message."""
    if name == "model":
        lm = load_model(draft or DEFAULT_DRAFT, device)
        return lambda: ModelDrafter(lm)
    if name == "eagle3":
        from core.eagle3_drafter import EagleDrafter
        head = head_for(target, head_folder(draft) if draft else DEFAULT_HEAD)
        return lambda: EagleDrafter(head, target)
    if name == "lookup":
        return lambda: LookupDrafter(target.vocab_size)
    raise ValueError(f"unknown drafter '{name}' (choose from {', '.join(DRAFTERS)})")


__all__ = ["DEFAULT_DRAFTER", "DrafterFactory", "drafter_factory", "HeadLoadError", "ModelLoadError"]
