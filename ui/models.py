"""Which models a visitor may pick: the embedded default, or a Hub id of a supported family (loaded
only when online). Local paths typed into the page are refused; operators can point the embedded
choice elsewhere with SPECSCOPE_TARGET / SPECSCOPE_DRAFT."""
from __future__ import annotations

import os
import re
from pathlib import Path

from core.loading import DEFAULT_DRAFT, DEFAULT_TARGET, ModelLoadError, load_model
from core.model import CausalLM

EMBEDDED = "embedded"
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def device() -> str:
    return os.environ.get("SPECSCOPE_DEVICE", "auto")


def resolve(name: str, role: str) -> str:
    """What load_model gets for the name typed in the model box; raises ValueError for anything else."""
    name = (name or "").strip()
    if name in ("", EMBEDDED):
        env = "SPECSCOPE_TARGET" if role == "target" else "SPECSCOPE_DRAFT"
        return os.environ.get(env, DEFAULT_TARGET if role == "target" else DEFAULT_DRAFT)
    if not HUB_ID.match(name) or ".." in name or Path(name).expanduser().exists():
        raise ValueError(f"'{name}' is not a Hub id like 'Qwen/Qwen2.5-0.5B'; local paths cannot be loaded from the page")
    return name


def get_models(target_name: str, draft_name: str, needs_draft: bool) -> tuple[CausalLM, CausalLM | None]:
    """Shared read-only weights (load_model caches them); raises ValueError with a one-line reason."""
    target_src = resolve(target_name, "target")
    draft_src = resolve(draft_name, "draft") if needs_draft else None
    try:
        target = load_model(target_src, device())  # load_model serialises loads itself
        draft = load_model(draft_src, device()) if draft_src else None
    except ModelLoadError as exc:
        raise ValueError(str(exc)) from None
    if draft is not None and len(draft.tokenizer) != len(target.tokenizer):
        raise ValueError("the draft and target tokenizers differ; pick a draft from the target's family")
    return target, draft
