"""RunConfig: everything that defines a run, as plain data that crosses to the engine side (ui/worker.py) and
into exports; a changed config means a fresh run."""
from __future__ import annotations

from dataclasses import dataclass

from core.model.chat import CHAT_MODES
from core.prompts import check_prompt_chars
from core.sampling import SamplingConfig
from ui.limits import prompt_char_limit
from ui.models import DEFAULT_DRAFTER


@dataclass(frozen=True)
class RunConfig:
    method: str
    prompt: str
    knobs: tuple[tuple[str, float | str], ...]
    temperature: float = 0.0
    seed: int = 0
    max_new_tokens: int = 64
    target: str = "embedded"
    draft: str = "embedded"
    drafter: str = DEFAULT_DRAFTER  # who proposes the trees: eagle3 | model | lookup
    chat: str = "auto"  # the target's chat template around the prompt: auto (when it has one) | on | off

    def __post_init__(self) -> None:
        check_prompt_chars(self.prompt, prompt_char_limit())  # before any tokenizer sees it
        if self.chat not in CHAT_MODES:
            raise ValueError(f"chat must be one of {', '.join(CHAT_MODES)} (got {self.chat!r})")

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(temperature=self.temperature, seed=self.seed)

    def as_dict(self) -> dict:
        out = {"method": self.method, "prompt": self.prompt, **dict(self.knobs), "temperature": self.temperature,
               "seed": self.seed, "max_new_tokens": self.max_new_tokens, "target": self.target, "draft": self.draft,
               "chat": self.chat}
        if self.method in ("chain", "static", "talon"):  # the methods that draft with a drafter
            out["drafter"] = self.drafter
        return out
