"""A prompt as the target saw it in training: wrapped in its tokenizer's chat template, or raw.

Published heads for Instruct targets were trained on chat-formatted conversations, and serving engines'
chat endpoints apply the template; on raw text a head meets text unlike its training data and drafts worse.
`chat` is auto (on when the target's tokenizer has a template), on or off. On wraps the prompt as one user
turn with add_generation_prompt=True and no system prompt; templates that read `enable_thinking` get False
unless the operator says otherwise (SPECSCOPE_CHAT_THINKING=on, or the `thinking` argument). The ids are
exactly what transformers' apply_chat_template returns, so a run here sees what a server would.

The result says which characters and tokens are the user's and which the template's own, so a page can
grey the template's tokens.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass

CHAT_MODES = ("auto", "on", "off")
THINKING_ENV = "SPECSCOPE_CHAT_THINKING"
_SENTINEL = "SpecScopePromptSentinel7f3a"  # stands in for the prompt to find where a template puts it


class ChatError(ValueError):
    """The chat setting cannot work with this tokenizer or prompt; the message is one line for users."""


@dataclass(frozen=True)
class ChatPrompt:
    """What a session is started from. Spans are [start, end): `prompt_chars` in `text`, `prompt_tokens`
    in `ids` (the tokens overlapping the user's characters; all others were added by the template or the
    tokenizer, e.g. a BOS token)."""
    ids: list[int]
    text: str  # the text the ids encode: the rendered template, or the prompt itself
    chat: bool  # whether the chat template was applied
    prompt_chars: tuple[int, int]
    prompt_tokens: tuple[int, int]
    thinking: bool | None = None  # enable_thinking as passed; None when the template does not read it

    def template_mask(self) -> list[bool]:
        """Per token: True when it is the template's (or tokenizer's) own, not the user's prompt."""
        a, b = self.prompt_tokens
        return [not a <= i < b for i in range(len(self.ids))]

    def to_dict(self) -> dict:
        return asdict(self)


def template_source(tokenizer) -> str | None:
    """The tokenizer's default chat template, or None when it has none."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    try:
        return tokenizer.get_chat_template()
    except ValueError:  # named templates without a default one
        return None


def has_chat_template(tokenizer) -> bool:
    return template_source(tokenizer) is not None


def resolve_chat(mode: str, tokenizer) -> bool:
    """Whether `mode` (auto | on | off) applies the template to this tokenizer; ChatError when it cannot."""
    if mode not in CHAT_MODES:
        raise ChatError(f"unknown chat mode '{mode}' (choose from {', '.join(CHAT_MODES)})")
    if mode == "off":
        return False
    has = has_chat_template(tokenizer)
    if mode == "on" and not has:
        raise ChatError("the target's tokenizer has no chat template (use auto or off)")
    return has


def thinking_default() -> bool:
    """The operator's choice for templates that read enable_thinking: off unless SPECSCOPE_CHAT_THINKING is on."""
    return os.environ.get(THINKING_ENV, "").strip().lower() in {"1", "on", "true", "yes"}


def _render(tokenizer, content: str, extra: dict, tokenize: bool):
    try:
        return tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                             tokenize=tokenize, return_dict=False, **extra)
    except Exception as exc:  # noqa: BLE001 - jinja raises many kinds (raise_exception in templates)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ChatError(f"the chat template could not render this prompt: {first}") from None


def _prompt_chars(text: str, around: str, prompt: str) -> tuple[int, int]:
    """Where the prompt sits in `text`, from the same template rendered around a sentinel: the text before
    and after the sentinel frames the prompt (whatever the template trimmed). Falls back to a search."""
    head, _, tail = around.partition(_SENTINEL)
    if _SENTINEL in around and text.startswith(head) and text.endswith(tail) and len(head) + len(tail) <= len(text):
        return len(head), len(text) - len(tail)
    core = prompt.strip()
    at = text.rfind(core) if core else -1
    return (at, at + len(core)) if at >= 0 else (0, len(text))


def _token_span(tokenizer, text: str, ids: list[int], chars: tuple[int, int], special: bool) -> tuple[int, int]:
    """The tokens overlapping `chars`, from the tokenizer's offsets (fast tokenizers); without offsets, by
    counting the tokens of the text before and after the span."""
    a, b = chars
    try:
        enc = tokenizer(text, add_special_tokens=special, return_offsets_mapping=True)
        offsets = enc["offset_mapping"] if enc["input_ids"] == ids else None
    except (NotImplementedError, ValueError, KeyError):
        offsets = None
    if offsets is None:
        before = len(tokenizer(text[:a], add_special_tokens=special)["input_ids"]) if a else 0
        after = len(tokenizer(text[b:], add_special_tokens=False)["input_ids"]) if b < len(text) else 0
        return min(before, len(ids)), max(min(before, len(ids)), len(ids) - after)
    inside = [i for i, (s, e) in enumerate(offsets) if e > a and s < b and e > s]
    if not inside:
        first = next((i for i, (s, e) in enumerate(offsets) if s >= b and e > s), len(ids))
        return first, first
    return inside[0], inside[-1] + 1


def prepare_prompt(tokenizer, prompt: str, mode: str = "auto", thinking: bool | None = None) -> ChatPrompt:
    """The ids a session starts from, and which of them are the user's. Raw (off, or auto without a
    template): exactly the tokenizer's own ids for the prompt, as Session would tokenize it. Raises ChatError."""
    if not prompt.strip():
        raise ChatError("the prompt is empty")
    if not resolve_chat(mode, tokenizer):
        ids = tokenizer(prompt)["input_ids"]
        span = _token_span(tokenizer, prompt, ids, (0, len(prompt)), special=True)
        return ChatPrompt(list(ids), prompt, False, (0, len(prompt)), span)
    takes = "enable_thinking" in (template_source(tokenizer) or "")
    flag = (thinking_default() if thinking is None else thinking) if takes else None
    extra = {} if flag is None else {"enable_thinking": flag}
    ids = list(_render(tokenizer, prompt, extra, tokenize=True))
    text = _render(tokenizer, prompt, extra, tokenize=False)
    chars = _prompt_chars(text, _render(tokenizer, _SENTINEL, extra, tokenize=False), prompt)
    return ChatPrompt(ids, text, True, chars, _token_span(tokenizer, text, ids, chars, special=False), flag)
