"""Session: prompt -> prefill -> step() -> StepTrace, with one method (AR, chain, trees, SpecBound).

A step is one draft phase plus one verification forward of the target. The session owns the
committed text and the caches; a method (see `Method`) owns how a step drafts and verifies.
Cache invariant: a cache's slots [0, length) hold exactly ids[0:length]; the committed tokens
after that ("pending", normally just the last one) are fed at the start of the next forward.
"""
from __future__ import annotations

import time
from typing import Protocol

import torch

from core.kv_cache import KVCache
from core.model import CausalLM
from core.sampling import SamplingConfig
from core.trace import GenerationResult, StepTrace


class SessionError(ValueError):
    """Bad input to a session (empty prompt, prompt too long, bad knob); the message is for users."""


class Method(Protocol):
    name: str
    needs_draft: bool

    def step(self, s: "Session") -> StepTrace: ...


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Timer:
    """Wall-clock milliseconds, synchronised with the device so GPU work is counted where it happens."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def __enter__(self) -> "Timer":
        sync(self.device)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        sync(self.device)
        self.ms = (time.perf_counter() - self.t0) * 1000


class Session:
    def __init__(self, target: CausalLM, method: Method, prompt: str | list[int],
                 sampling: SamplingConfig = SamplingConfig(), max_new_tokens: int = 64,
                 draft: CausalLM | None = None) -> None:
        try:
            sampling.validate()
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        if max_new_tokens < 1:
            raise SessionError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")
        if method.needs_draft and draft is None:
            raise SessionError(f"method '{method.name}' needs a draft model")
        self.target, self.draft, self.method = target, draft, method
        self.sampling, self.max_new_tokens = sampling, max_new_tokens
        if isinstance(prompt, str):
            if not prompt.strip():
                raise SessionError("the prompt is empty")
            prompt = target.tokenizer(prompt)["input_ids"]
        if not prompt:
            raise SessionError("the prompt is empty")
        if len(prompt) >= target.max_context:
            raise SessionError(f"the prompt is {len(prompt)} tokens; the model's context is {target.max_context}")
        self.prompt_ids = list(prompt)
        self.ids = list(prompt)
        self.traces: list[StepTrace] = []
        self.stop_reason: str | None = None
        self.gen = torch.Generator(device=target.device).manual_seed(sampling.seed)
        self.tcache: KVCache | None = None  # allocated by the first step, so building a session is cheap
        self.dcache: KVCache | None = None
        self.prefill_ms = 0.0

    def _prefill(self, lm: CausalLM) -> KVCache:
        """Cache everything but the last prompt token, which the first step feeds."""
        cache = lm.new_cache(self.target.max_context)
        head = self.ids[:-1]
        if head:
            lm.forward(head, range(len(head)), cache)
        return cache

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    @property
    def output_ids(self) -> list[int]:
        return self.ids[len(self.prompt_ids):]

    @property
    def remaining(self) -> int:
        """Tokens that may still be committed (length and context limits)."""
        return min(self.max_new_tokens - len(self.output_ids), self.target.max_context - len(self.ids))

    def text_of(self, token_id: int) -> str:
        return self.target.tokenizer.decode([token_id])

    def pending(self, cache: KVCache) -> list[int]:
        return self.ids[cache.length:]

    def commit(self, proposed: list[int]) -> list[int]:
        """Append what the step produced, cut at EOS (kept) and at the length/context limits."""
        kept: list[int] = []
        eos = self.target.eos_ids
        for tok in proposed:
            if len(kept) >= self.remaining:
                break
            kept.append(tok)
            if tok in eos:
                self.stop_reason = "eos"
                break
        self.ids.extend(kept)
        if self.stop_reason is None and self.remaining <= 0:
            limit_hit = len(self.output_ids) >= self.max_new_tokens
            self.stop_reason = "length" if limit_hit else "context"
        return kept

    def finish_trace(self, trace: StepTrace, proposed: list[int]) -> StepTrace:
        """Commit `proposed` and record it (and the stop reason) in the trace."""
        kept = self.commit(proposed)
        trace.committed_ids = kept
        trace.committed_texts = [self.text_of(t) for t in kept]
        trace.tau = len(kept)
        trace.stop_reason = self.stop_reason
        self.traces.append(trace)
        return trace

    def new_trace(self) -> StepTrace:
        return StepTrace(index=len(self.traces), method=self.method.name, context_len=len(self.ids))

    @torch.inference_mode()
    def step(self) -> StepTrace:
        if self.done:
            raise SessionError(f"generation has finished ({self.stop_reason}); reset to start again")
        if self.tcache is None:
            # 0. prefill the target (and the draft, when the method drafts with one)
            with Timer(self.target.device) as t:
                self.tcache = self._prefill(self.target)
                if self.method.needs_draft:
                    self.dcache = self._prefill(self.draft)
            self.prefill_ms = t.ms
        return self.method.step(self)

    def generate(self) -> GenerationResult:
        t0 = time.perf_counter()
        while not self.done:
            self.step()
        return self.result(time.perf_counter() - t0)

    def result(self, wall_s: float) -> GenerationResult:
        return GenerationResult(
            method=self.method.name, prompt_ids=self.prompt_ids, output_ids=self.output_ids,
            text=self.target.tokenizer.decode(self.output_ids), traces=self.traces, wall_s=wall_s,
            stop_reason=self.stop_reason,
        )
