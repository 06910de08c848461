"""Session: prompt -> prefill -> step() -> StepTrace, with one method (AR, chain, trees, SpecBound).

A step is one draft phase plus one verification forward of the target. The session owns the
committed text, the target's cache and the drafter (which owns its own); a method (see `Method`)
owns how a step drafts and verifies. Cache invariant: a cache's slots [0, length) hold exactly
ids[0:length]; the committed tokens after that ("pending", normally just the last one) are fed at
the start of the next forward.

The committed text is the session's state; caches are a rebuildable acceleration: `drop_caches()`
forgets them and the next step rebuilds them from the text. A step is atomic: if anything in it fails,
the text, traces and random state are as before it and the caches are rebuilt on the next step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from core.drafters.contract import Drafter
from core.model.causal_lm import CausalLM
from core.model.kv_cache import KVCache
from core.sampling import SamplingConfig
from core.trace import GenerationResult, StepTrace

if TYPE_CHECKING:
    from core.auto.budget import AutoState


class SessionError(ValueError):
    """Bad input to a session (empty prompt, prompt too long, bad knob); the message is for users."""


class Method(Protocol):
    name: str
    needs_draft: bool  # drafts with a drafter (else: AR, or SpecBound's own layers)
    scratch: int  # cache slots a step may write beyond the committed text

    def prepare(self, s: "Session") -> None: ...  # once, when the session is built: work no step should time

    def step(self, s: "Session") -> StepTrace: ...  # commits through s.commit, returns s.step_trace(...)


@dataclass
class MethodState:
    """What a method keeps between one session's steps: per session, so two visitors never share it."""
    auto: AutoState | None = None  # `auto`'s schedule and predictor (core/auto/budget.py), from TreeMethod.prepare
    mu: float | None = None  # the adaptive schedule's gate ratio μ for the next step (core/trees/mu_schedule.py)


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
                 draft: Drafter | None = None) -> None:
        """draft: for methods that draft, a Drafter made for this session (it holds this session's draft caches;
        core/drafter_registry.drafter_factory makes them, one per session)."""
        try:
            sampling.validate()
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        if max_new_tokens < 1:
            raise SessionError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")
        if method.needs_draft and draft is None:
            raise SessionError(f"method '{method.name}' needs a draft model")
        self.target, self.method = target, method
        if method.needs_draft and not hasattr(draft, "propose"):
            raise TypeError(f"draft must be a Drafter, not {type(draft).__name__} (wrap a draft LM in ModelDrafter)")
        self.drafter: Drafter | None = draft if method.needs_draft else None
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
        self.steps_before = 0  # steps made before this object existed (a session rebuilt from a Snapshot)
        self.stop_reason: str | None = None
        self.gen = torch.Generator(device=target.device).manual_seed(sampling.seed)
        self.tcache: KVCache | None = None  # allocated by the first step, so building a session is cheap
        self.prefill_ms = 0.0
        self.state = MethodState()
        # caches hold what this session can reach, plus what one step may write beyond it
        reach = min(target.max_context, len(self.prompt_ids) + max_new_tokens)
        self.cache_len = reach + getattr(method, "scratch", 64)
        method.prepare(self)  # e.g. auto's cost curves: measured before any step is timed, never inside one

    def _prefill(self) -> None:
        """Cache everything committed but the last token, which the next step feeds (target and drafter)."""
        self.tcache = self.target.new_cache(self.cache_len)
        head = self.ids[:-1]
        taps = self.drafter.taps if self.drafter else ()
        feats = None
        if head:
            feats = self.target.forward(head, range(len(head)), self.tcache, taps=taps).taps
        if self.drafter:
            self.drafter.prefill(self.ids, feats, self.cache_len)

    def drop_caches(self) -> None:
        """Forget the caches (memory); the next step rebuilds them from the committed text."""
        self.tcache = None
        if self.drafter:
            self.drafter.drop()

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
        return self.target.token_text(token_id)

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

    def step_trace(self, kept: list[int], **fields) -> StepTrace:
        """The step's record, built once at its end (after `commit` returned `kept`): what it committed and
        the stop reason beside the method's own fields. `step()` times it and publishes it; nothing changes
        it afterwards."""
        return StepTrace(index=self.steps_before + len(self.traces), method=self.method.name,
                         context_len=len(self.ids) - len(kept),
                         committed_ids=list(kept), committed_texts=[self.text_of(t) for t in kept], tau=len(kept),
                         stop_reason=self.stop_reason, **fields)

    @torch.inference_mode()
    def step(self) -> StepTrace:
        """One step of the method: draft -> verify -> commit -> tell the drafter (see each method)."""
        if self.done:
            raise SessionError(f"generation has finished ({self.stop_reason}); reset to start again")
        n_ids, n_traces, rng = len(self.ids), len(self.traces), self.gen.get_state()
        try:
            if self.tcache is None:
                # 0. prefill the target (and the drafter) with the committed text
                with Timer(self.target.device) as t:
                    self._prefill()
                self.prefill_ms = t.ms
            with Timer(self.target.device) as t:
                trace = self.method.step(self)
            trace.step_ms = max(0.0, t.ms - trace.display_ms)  # the last field; work only the page needs left out
            self.traces.append(trace)
            return trace
        except BaseException:
            # atomic: the text as before the step; caches rebuilt from it by the next step
            del self.ids[n_ids:]
            del self.traces[n_traces:]
            self.stop_reason = None
            self.gen.set_state(rng)
            self.drop_caches()
            raise

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
