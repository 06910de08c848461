"""A Run is one browser session's live decoding: the engine Session (torch caches, never copied), the
plain traces it produced, step timings, the prefix before each step (for the static side-by-side) and
the AR baseline. gr.State holds the Run object itself; Gradio stores returned state without copying."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from core.engine import Session, SessionError
from core.methods import build_method
from core.prompts import check_prompt_chars
from core.sampling import SamplingConfig
from core.trace import StepTrace
from ui.baseline import BASELINES, timed_step
from ui.limits import CACHES, prompt_char_limit
from ui.models import DEFAULT_DRAFTER, get_models
from core.metrics import Baseline, RunStats, run_stats


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run; a changed config means a fresh run."""
    method: str
    prompt: str
    knobs: tuple[tuple[str, float | str], ...]
    temperature: float = 0.0
    seed: int = 0
    max_new_tokens: int = 64
    target: str = "embedded"
    draft: str = "embedded"
    drafter: str = DEFAULT_DRAFTER  # who proposes the trees: eagle3 | model | lookup

    def __post_init__(self) -> None:
        check_prompt_chars(self.prompt, prompt_char_limit())  # before any tokenizer sees it

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(temperature=self.temperature, seed=self.seed)

    def as_dict(self) -> dict:
        out = {"method": self.method, "prompt": self.prompt, **dict(self.knobs), "temperature": self.temperature,
               "seed": self.seed, "max_new_tokens": self.max_new_tokens, "target": self.target, "draft": self.draft}
        if self.method in ("chain", "static", "talon"):  # the methods that draft with a drafter
            out["drafter"] = self.drafter
        return out


def build(method: str, knobs: dict):
    """build_method with a clear message when a method's module has not landed in this build."""
    try:
        return build_method(method, **knobs)
    except ImportError as exc:
        raise ValueError(f"'{method}' is not available in this build ({exc})") from None


def new_session(cfg: RunConfig, prompt: str | list[int] | None = None, method: str | None = None) -> Session:
    m = build(method or cfg.method, dict(cfg.knobs))
    target, draft = get_models(cfg.target, cfg.draft, m.needs_draft, cfg.drafter)
    return Session(target, m, cfg.prompt if prompt is None else prompt, cfg.sampling, cfg.max_new_tokens, draft)


@dataclass
class Run:
    config: RunConfig
    session: Session
    step_ms: list[float] = field(default_factory=list)
    prefixes: list[list[int]] = field(default_factory=list)  # committed ids before each step
    shadows: dict[int, StepTrace] = field(default_factory=dict)  # step -> static tree from the same prefix
    base: Baseline | None = None  # AR timed over this run's positions (after each step, off the Step path)
    lock: threading.Lock = field(default_factory=threading.Lock)
    retired: bool = False  # Reset was pressed: a step still running for this run is discarded when it ends
    label = ""  # beside the figure titles: a live run needs none (an imported trace says so)
    note = ""  # above the stats

    @classmethod
    def start(cls, cfg: RunConfig) -> "Run":
        return cls(cfg, new_session(cfg))

    def __deepcopy__(self, memo) -> "Run":
        return self  # the caches are per session and never copied

    @property
    def traces(self) -> list[StepTrace]:
        return self.session.traces

    @property
    def done(self) -> bool:
        return self.session.done

    def prompt_text(self) -> str:
        return self.session.target.tokenizer.decode(self.session.prompt_ids, skip_special_tokens=True)

    def step(self) -> StepTrace:
        """One engine step, timed around the call like the AR baseline's steps, any prefill taken out."""
        if not self.lock.acquire(blocking=False):
            raise SessionError("a step is already running for this session")
        try:
            prefix = list(self.session.ids)
            self.step_ms.append(timed_step(self.session))
            trace = self.session.traces[-1]
            CACHES.touch(self)  # only recently stepped runs keep caches; others rebuild on their next step
            self.prefixes.append(prefix)
            return trace
        finally:
            self.lock.release()

    def shadow(self, index: int, knobs: dict) -> StepTrace | None:
        """The static EAGLE-style tree drafted and verified once from step `index`'s prefix with the same
        budget (under `auto`, the N and T_shape auto chose for that step), with the same drafter, in a throwaway session,
        so the run's own text is untouched."""
        if index in self.shadows or not 0 <= index < len(self.prefixes):
            return self.shadows.get(index)
        cfg, prefix = self.config, self.prefixes[index]
        knobs = {k: v for k, v in knobs.items() if k != "auto"}
        chosen = self.traces[index].auto if index < len(self.traces) else None
        if chosen is not None:
            knobs["N"] = chosen.N
            if chosen.T_shape is not None:
                knobs["shape_temperature"] = chosen.T_shape
        left = cfg.max_new_tokens - (len(prefix) - len(self.session.prompt_ids))  # the same length limit
        shadow_cfg = RunConfig("static", cfg.prompt, tuple(knobs.items()), cfg.temperature, cfg.seed + index,
                               max(1, left), cfg.target, cfg.draft, cfg.drafter)
        self.shadows[index] = new_session(shadow_cfg, prompt=prefix).step()
        return self.shadows[index]

    def baseline(self, fresh: bool = False) -> Baseline:
        """AR timed over the positions this run has committed (one past its end once it has finished, to
        see whether AR stops there too), for this prompt, model and sampling; `fresh` measures anew."""
        c = self.config
        timer = BASELINES.timer(c.target, c.prompt, c.temperature, c.seed, c.max_new_tokens, fresh)
        self.base = timer.advance(len(self.session.output_ids) + (1 if self.done else 0))
        return self.base

    def stats(self) -> RunStats:
        return run_stats(self.traces, self.step_ms, self.session.output_ids, self.config.sampling.greedy,
                         self.base, self.done)

    def export(self) -> dict:
        """The whole run as JSON-ready data: config, text, every step's trace and the static shadows."""
        return {
            "config": self.config.as_dict(),
            "prompt_text": self.prompt_text(),
            "output_text": self.session.target.tokenizer.decode(self.session.output_ids),
            "output_ids": list(self.session.output_ids),
            "stop_reason": self.session.stop_reason,
            "step_ms": list(self.step_ms),
            "steps": [t.to_dict() for t in self.traces],
            "static_shadows": {str(i): t.to_dict() for i, t in self.shadows.items()},
        }
