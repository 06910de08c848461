"""Long runs (Compare, Tune): an estimate of how long they take, their progress, and a way to cancel them.

Why cooperative: Gradio's `cancels=` stops delivering a handler's output, but the worker thread that runs
the models would carry on to the end and hold the shared CPU. So each run checks its Job between engine
steps and stops within one step once the visitor's Cancel sets the flag; what finished stays on the page.
The estimate is measured, not guessed: runs × tokens × this machine's AR milliseconds per token."""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.sampling import SamplingConfig
from ui.baseline import BASELINES, ARTimer
from ui.priority import GATE
from viz.escape import esc

if TYPE_CHECKING:
    import gradio as gr


class Cancelled(Exception):
    """The visitor pressed Cancel: the run stops between two engine steps."""


@dataclass
class Job:
    """One long run of one browser session: `total` parts of up to `tokens` generated tokens each;
    `what` describes them for the page ("Compare: 6 runs of up to 48 tokens")."""
    what: str
    parts: list[str]  # what runs, in order
    tokens: int
    ms_per_token: float
    done: int = 0
    started: float = field(default_factory=time.perf_counter)
    flag: threading.Event = field(default_factory=threading.Event)
    waited: set[int] = field(default_factory=set)  # the interactive calls it waited its most for (ui/priority.py)
    pace: float = 1.0  # how much slower than plain AR the last finished run of this kind went here (JOBS.pace)

    @property
    def total(self) -> int:
        return len(self.parts)

    def check(self) -> None:
        """Between two engine steps: let any visitor's Step go first, then stop here if cancelled."""
        GATE.wait_turn(self.waited)
        if self.flag.is_set():
            raise Cancelled()

    @property
    def at_ar_pace_s(self) -> float:
        """Every part as long as plain AR on this machine."""
        return self.total * self.tokens * self.ms_per_token / 1000

    @property
    def estimate_s(self) -> float:
        """Up front: AR's pace, times how much slower the last finished run of this kind went here (a Tune of
        deep trees on a real model took twice its AR-pace estimate)."""
        return self.at_ar_pace_s * self.pace

    def left_s(self) -> float:
        """The up-front estimate until a run has finished, then the measured pace of the finished ones."""
        if self.done == 0:
            return max(0.0, self.estimate_s - self.elapsed())
        return self.elapsed() / self.done * (self.total - self.done)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def status(self) -> str:
        """A line for the page: the estimate, a meter, what runs now and the time left."""
        share = self.done / max(1, self.total)
        pace = (f"and {self.pace:.1f}× that, as the last such run here went" if self.pace != 1.0 else
                "and every method taken as about as fast: the first such run here, so it may run longer")
        head = (f"{self.what}: estimated {duration(self.estimate_s)} ({self.ms_per_token:.0f} ms per token, plain AR "
                f"on this machine, {pace}).")
        doing = f" · running {self.parts[self.done]}" if self.done < self.total else ""
        now = (f"{self.done} of {self.total} done{doing} · "
               f"{duration(self.elapsed())} so far, about {duration(self.left_s())} left.")
        return (f'<div class="ss-budget" role="status">{esc(head)}<div class="ss-meter"><div style="width:'
                f'{100 * share:.0f}%"></div></div>{esc(now)}</div>')

    def ended(self, cancelled: bool) -> str:
        if cancelled:
            text = (f"Cancelled after {self.done} of {self.total} ({duration(self.elapsed())}): "
                    f"the results below are the ones that finished.")
        else:
            text = f"{self.what}, done in {duration(self.elapsed())} (estimated {duration(self.estimate_s)})."
        return f'<div class="ss-budget" role="status">{esc(text)}</div>'


def duration(s: float) -> str:
    s = max(0.0, s)
    return f"{s:.0f} s" if s < 90 else f"{s // 60:.0f} min {s % 60:.0f} s"


class Jobs:
    """The running Job of each browser session (by Gradio's session hash)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._cancelled: dict[str, None] = {}  # event ids of queued calls cancelled before their turn, in order
        self._pace: dict[str, float] = {}  # tab -> elapsed / AR-pace estimate of its last finished run
        self._lock = threading.Lock()

    def start(self, key: str | None, job: Job) -> Job:
        """Register `job` as its session's; a session runs one long job at a time (Compare or Tune)."""
        if key:
            with self._lock:
                session = key.split(":")[0]
                busy = [k for k in self._jobs if k.split(":")[0] == session]
                if busy:
                    raise ValueError(f"your {busy[0].split(':')[1].title()} is still running: wait for it or "
                                     f"press its Cancel first")
                self._jobs[key] = job
        return job

    def finish(self, key: str | None, job: Job) -> None:
        with self._lock:
            if key and self._jobs.get(key) is job:
                del self._jobs[key]

    def cancel(self, key: str | None) -> Job | None:
        with self._lock:
            job = self._jobs.pop(key, None) if key else None
        if job is not None:
            job.flag.set()
        return job

    def pace(self, kind: str) -> float:
        """How much slower than AR's pace the last finished run of `kind` (the tab) went on this server; 1 at first."""
        with self._lock:
            return self._pace.get(kind, 1.0)

    def learn_pace(self, kind: str, job: Job) -> None:
        """A run of `kind` finished (not cancelled): its elapsed time over its AR-pace estimate, for the next one."""
        if job.at_ar_pace_s > 0:
            with self._lock:
                self._pace[kind] = min(20.0, max(0.2, job.elapsed() / job.at_ar_pace_s))

    def cancel_queued(self, event_ids: list[str]) -> None:
        """These queued calls end as cancelled when their turn comes, before any work (long_run)."""
        with self._lock:
            self._cancelled.update(dict.fromkeys(event_ids))
            while len(self._cancelled) > 1024:  # calls that never came (their tab closed): forget the oldest
                self._cancelled.pop(next(iter(self._cancelled)))

    def was_cancelled(self, event_id: str | None) -> bool:
        with self._lock:
            if event_id is None or event_id not in self._cancelled:
                return False
            del self._cancelled[event_id]
            return True


JOBS = Jobs()


def ar_ms_per_token(target: str, prompt: str, tokens: int = 4) -> float:
    """This machine's plain AR cost per token for `target`: the median of AR timings cached for the page's
    runs when there are any, else a few AR steps of `prompt` timed now (well under a second)."""
    known = BASELINES.recent_ms(target)
    if known:
        return known
    t = ARTimer(target, prompt, SamplingConfig(), tokens)
    ms = t.advance(tokens).token_ms
    return statistics.median(ms) if ms else 100.0


LONG = dict(concurrency_id="long", concurrency_limit=1)  # Compare, Tune, cost curve: one at a time per server,
# in their own group so a Step never queues behind them (they also pause between steps: ui/priority.py)


def session_key(request: gr.Request | None, tab: str) -> str | None:
    """A browser session's Compare or Tune run (both may run at once, each with its own Cancel)."""
    hash_ = getattr(request, "session_hash", None) if request is not None else None
    return f"{hash_}:{tab}" if hash_ else None


def long_run(job: Job, key: str | None, parts, show, footer=None):
    """Drive a Compare or Tune generator: yield its outputs by name (`show(partial result)`) and a status line,
    the estimate first, then after each part with the time left; on Cancel, the parts that finished and a
    line saying so. `footer(last result)`: HTML under the final status line (Tune's server settings)."""
    if JOBS.was_cancelled(current_event()):  # cancelled while it waited in the queue: nothing ran
        yield {"status": f'<div class="ss-budget" role="status">{esc(job.what)}: cancelled while it waited in '
                         f'the queue; nothing ran.</div>'}
        return
    kind = key.split(":")[-1] if key else ""
    job.pace = JOBS.pace(kind)
    JOBS.start(key, job)
    shown, last = {}, None
    yield {"status": job.status()}
    try:
        for partial in parts(job.check):
            job.done += 1
            shown, last = show(partial), partial
            yield {**shown, "status": job.status()}
        JOBS.learn_pace(kind, job)
        yield {**shown, "status": job.ended(cancelled=False) + (footer(last) if footer and last is not None else "")}
    except Cancelled:
        yield {**shown, "status": job.ended(cancelled=True) + (footer(last) if footer and last is not None else "")}
    finally:
        JOBS.finish(key, job)


def current_event() -> str | None:
    """The id of the Gradio call being handled now (None outside one)."""
    from gradio.context import LocalContext
    return LocalContext.event_id.get(None)


def queued_calls(request: gr.Request | None, api_name: str) -> list[str]:
    """Event ids of this session's calls of `api_name` still waiting in Gradio's queue (behind another
    visitor's Tune, say): a Cancel from the API (or a closed tab) must reach them too, not only a running one."""
    from gradio.context import LocalContext
    blocks = LocalContext.blocks.get(None)
    queue = getattr(blocks, "_queue", None)
    session = getattr(request, "session_hash", None) if request is not None else None
    if queue is None or not session:
        return []
    return [e._id for q in list(queue.event_queue_per_concurrency_id.values()) for e in list(q.queue)
            if e.session_hash == session and getattr(e.fn, "api_name", None) == api_name]


def cancel(request: gr.Request | None, tab: str, api_name: str | None = None) -> str:
    """Cancel: this session's `tab` run stops before its next engine step (what finished stays), and its calls
    of `api_name` waiting in the queue end without running when their turn comes."""
    waiting = queued_calls(request, api_name) if api_name else []
    JOBS.cancel_queued(waiting)
    job = JOBS.cancel(session_key(request, tab))
    if job is not None:
        return job.ended(cancelled=True)
    if waiting:
        return '<div class="ss-budget" role="status">Cancelled before it started: it was waiting in the queue.</div>'
    return '<div class="ss-budget" role="status">Nothing to cancel.</div>'
