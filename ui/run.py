"""A Run is one browser session's decoding, held by gr.State as plain data: the config, the traces, step
timings, the prefix before each step (for the static side-by-side), the AR baseline and a Snapshot of where
the engine session stands. It holds no model, cache or lock, so it pickles: the engine session lives on the
engine side (ui/worker.py), keyed by the run's token, and is rebuilt from the snapshot whenever it is missing
(another process on a ZeroGPU Space, or evicted to bound memory)."""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Callable

from core.auto.cost_model import CostModel
from core.eagle3.readout import CompatReadout, PositionTally, readout
from core.engine import SessionError
from core.metrics import Baseline, RunStats, run_stats
from core.snapshot import Snapshot
from core.trace import StepTrace
from ui.config import RunConfig
from ui.gpu import CHUNK, remote
from ui.worker import SESSIONS, StepOutcome, cost_curve, run_steps, static_step


class Busy:
    """Runs stepping right now, by token: a second Step of the same run (a click during a Play tick) is
    refused rather than interleaved. Only tokens live here, never runs."""

    def __init__(self) -> None:
        self._tokens: set[str] = set()
        self._lock = threading.Lock()

    def claim(self, token: str) -> None:
        with self._lock:
            if token in self._tokens:
                raise SessionError("a step is already running for this session")
            self._tokens.add(token)

    def release(self, token: str) -> None:
        with self._lock:
            self._tokens.discard(token)


BUSY = Busy()


@dataclass
class Run:
    config: RunConfig
    token: str = field(default_factory=lambda: uuid.uuid4().hex)  # the engine session's key
    snap: Snapshot | None = None  # where the engine session stands after the last step
    traces: list[StepTrace] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    prefixes: list[list[int]] = field(default_factory=list)  # committed ids before each step
    shadows: dict[int, StepTrace] = field(default_factory=dict)  # step -> static tree from the same prefix
    base: Baseline | None = None  # AR timed over this run's positions (ui/baseline.time_baseline, off the Step path)
    prompt: list[tuple[str, bool]] = field(default_factory=list)  # as the page shows it: (text, from the template?)
    output_text: str = ""
    device: str = ""  # where the engine ran its last step
    head: dict | None = None  # the EAGLE-3 head's HeadInfo when the drafter reads one
    tally: PositionTally = field(default_factory=PositionTally)  # acceptance by draft position, so far
    cost: CostModel | None = None  # this machine's cost curve for the run's target and drafter (trees only)
    retired: bool = False  # Reset was pressed: a step still running for this run is discarded when it ends
    label = ""  # beside the figure titles: a live run needs none (an imported trace says so)
    note = ""  # above the stats

    @classmethod
    def start(cls, cfg: RunConfig) -> "Run":
        return cls(cfg)

    def __deepcopy__(self, memo) -> "Run":
        return self  # one visitor's run is one object: Reset's flag reaches a step in flight

    @property
    def done(self) -> bool:
        return self.snap is not None and self.snap.stop_reason is not None

    @property
    def stop_reason(self) -> str | None:
        return None if self.snap is None else self.snap.stop_reason

    @property
    def output_ids(self) -> list[int]:
        return [] if self.snap is None else self.snap.output_ids

    @property
    def ids(self) -> list[int]:
        return [] if self.snap is None else list(self.snap.ids)

    def prompt_text(self) -> str:
        return "".join(text for text, _ in self.prompt) or self.config.prompt

    def prompt_parts(self) -> list[tuple[str, bool]]:
        return self.prompt or [(self.config.prompt, False)]

    def step(self, n: int = 1) -> StepTrace:
        """Up to `n` engine steps (one engine call), each timed around the engine call like the AR
        baseline's steps, any prefill taken out. Returns the last new step's trace."""
        BUSY.claim(self.token)
        try:
            self.record(run_steps(self.config, self.token, self.snap, n))
        finally:
            BUSY.release(self.token)
        return self.traces[-1]

    def record(self, out: StepOutcome) -> None:
        self.traces += out.traces
        self.step_ms += out.step_ms
        self.prefixes += out.prefixes
        self.snap, self.prompt, self.output_text, self.device = (out.snapshot, out.prompt_parts, out.output_text,
                                                                 out.device)
        self.head = out.head
        self.tally.merge(out.tally)

    def readout(self) -> CompatReadout:
        """Does the head fit the target? Acceptance by draft position, the head, its vocabulary's coverage."""
        return readout(self.tally, self.head)

    def to_end(self, check: Callable[[], None] | None = None) -> "Run":
        """Step until the run stops; `check` runs between engine calls (Cancel, and long jobs giving way to
        a visitor's Step). Calls carry one step, or CHUNK steps when they are remote."""
        while not self.done:
            if check is not None:
                check()
            self.step(CHUNK if remote() else 1)
        return self

    def shadow(self, index: int, knobs: dict) -> StepTrace | None:
        """The static EAGLE-style tree drafted and verified once from step `index`'s prefix with the same
        budget (under `auto`, the N and T_shape auto chose for that step), with the same drafter, in a
        throwaway session, so the run's own text is untouched."""
        if index in self.shadows or not 0 <= index < len(self.prefixes):
            return self.shadows.get(index)
        cfg, prefix = self.config, self.prefixes[index]
        knobs = {k: v for k, v in knobs.items() if k != "auto"}
        chosen = self.traces[index].auto if index < len(self.traces) else None
        if chosen is not None:
            knobs["N"] = chosen.N
            if chosen.T_shape is not None:
                knobs["shape_temperature"] = chosen.T_shape
        left = cfg.max_new_tokens - (len(prefix) - self.snap.prompt_len)  # the same length limit
        shadow_cfg = RunConfig("static", cfg.prompt, tuple(knobs.items()), cfg.temperature, cfg.seed + index,
                               max(1, left), cfg.target, cfg.draft, cfg.drafter)
        self.shadows[index] = static_step(shadow_cfg, prefix)
        return self.shadows[index]

    def stats(self) -> RunStats:
        return run_stats(self.traces, self.step_ms, self.output_ids, self.config.sampling.greedy, self.base,
                         self.done, cost=self.cost)

    def fetch_cost(self) -> None:
        """This machine's cost curve for a tree run (kept on disk a day; measured at start-up for the default
        pair), so the stats can put R on it beside the papers' R. Off the Step path, like the baseline."""
        if self.cost is None and self.config.method in ("chain", "static", "talon"):
            c = self.config
            self.cost = cost_curve(c.target, c.draft, c.drafter)

    def forget(self) -> None:
        """The run is gone: free its engine session now rather than when the LRU gets to it."""
        SESSIONS.forget(self.token)

    def export(self) -> dict:
        """The whole run as JSON-ready data: config, text, every step's trace and the static shadows."""
        return {
            "config": self.config.as_dict(),
            "prompt_text": self.prompt_text(),
            "chat_applied": any(template for _, template in self.prompt),
            "output_text": self.output_text,
            "output_ids": self.output_ids,
            "stop_reason": self.stop_reason,
            "step_ms": list(self.step_ms),
            "steps": [t.to_dict() for t in self.traces],
            "static_shadows": {str(i): t.to_dict() for i, t in self.shadows.items()},
            "head": self.head,
            "compat": self.readout().to_dict(),
        }


def forget(run) -> None:
    """gr.State's delete_callback: a visitor's run (or imported trace) is gone; free its engine session."""
    if run is not None:
        run.forget()
