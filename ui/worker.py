"""The engine side of the page: every call that runs a model, each taking and returning plain data.

Why a boundary here: on a ZeroGPU Space each of these runs in a GPU worker process whose arguments and
result are pickled and whose memory does not outlive the call (ui/gpu.py). So the page keeps a run as plain
data (ui/run.py) and hands each call what it needs to rebuild the engine session: the config and a Snapshot
of the committed text. Live sessions are kept here, keyed by the run's token, as a rebuildable acceleration:
when the session is missing or stale (another process, evicted, or a server restarted) it is rebuilt from the
snapshot and continues exactly."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from core.auto.cost_model import CostModel, measure_costs
from core.drafters.contract import Drafter
from core.eagle3.readout import PositionTally, drafter_context
from core.engine import Session, SessionError
from core.methods import build_method
from core.model.causal_lm import CausalLM
from core.model.chat import ChatPrompt, prepare_prompt
from core.model.loading import why_dtype
from core.model.real_models import REAL_MODELS
from core.snapshot import Snapshot, restore, take_snapshot
from core.trace import StepTrace
from ui.gpu import gpu
from ui.limits import cached_sessions
from ui.models import drafter_weights, get_models, model_label, new_drafter
from ui.redact import no_paths


def timed_step(session: Session) -> float:
    """One engine step's wall time in ms, with a prefill inside it taken out (runs and AR alike), and the work
    only the page needs (StepTrace.display_ms)."""
    prefills = session.tcache is None
    t0 = time.perf_counter()
    trace = session.step()
    ms = (time.perf_counter() - t0) * 1000 - trace.display_ms
    return max(0.0, ms - session.prefill_ms) if prefills else max(0.0, ms)


def new_session(cfg, prefix: list[int] | None = None) -> tuple[Session, list[tuple[str, bool]]]:
    """An engine session for a RunConfig (ui/run.py): its method, models and drafter, started from the prompt
    (in the target's chat template when cfg.chat says so) or from `prefix` ids. Also the prompt as the page
    shows it: (text, added by the template?) parts."""
    m = build_method(cfg.method, **dict(cfg.knobs))
    target, _ = get_models(cfg.target, cfg.draft, False, cfg.drafter)
    draft = session_drafter(cfg, target) if m.needs_draft else None
    tok = target.tokenizer
    if prefix is not None:
        return Session(target, m, prefix, cfg.sampling, cfg.max_new_tokens, draft), []
    cp = prepare_prompt(tok, cfg.prompt, cfg.chat)
    return Session(target, m, cp.ids, cfg.sampling, cfg.max_new_tokens, draft), prompt_parts(tok, cp)


FIX = {  # what would make a drafter run on a target it cannot draft for
    "model": "name a draft LM that shares the target's tokenizer (one of its family) in the draft box under Model",
    "eagle3": "name the EAGLE-3 head published for this target in the draft box under Model",
    "self": "set ℓ_self between 1 and the target's layers − 1",
}
ANY_TARGET = ("lookup", "self")  # drafters that run on any target


def session_drafter(cfg, target: CausalLM) -> Drafter:
    """A fresh drafter of the chosen kind for the session; one that cannot run on this target is refused in one
    line that names the model and says why and what would make it run."""
    try:
        return new_drafter(cfg.drafter, target, drafter_weights(cfg.drafter, cfg.draft), dict(cfg.knobs))
    except ValueError as exc:
        raise ValueError(drafter_refusal(cfg.drafter, cfg.target, str(exc))) from None


def drafter_refusal(drafter: str, target: str, reason: str) -> str:
    """"drafter 'model' cannot run on <model>: <why>; to run it, <fix>; lookup and self run on any target"."""
    why = no_paths(reason.split(": ", 1)[1] if reason.startswith(f"drafter '{drafter}' cannot be used") else reason)
    fix = f"; to run it, {FIX[drafter]}" if drafter in FIX else ""
    others = [d for d in ANY_TARGET if d != drafter]
    return (f"drafter '{drafter}' cannot run on {model_label(target or 'embedded')}: {why}{fix}; "
            f"{' and '.join(others)} run{'s' * (len(others) == 1)} on any target")


def prompt_parts(tok, cp: ChatPrompt) -> list[tuple[str, bool]]:
    """The prompt as text, split where the chat template's own tokens (shown with their special tokens) end
    and the user's begin; one part when no template was applied."""
    if not cp.chat:
        return [(tok.decode(cp.ids, skip_special_tokens=True), False)]
    a, b = cp.prompt_tokens
    parts = [(tok.decode(cp.ids[:a]), True), (tok.decode(cp.ids[a:b]), False), (tok.decode(cp.ids[b:]), True)]
    return [p for p in parts if p[0]]


@dataclass
class Live:
    """One run's engine session on this side, the prompt as the page shows it, and the lock that keeps two
    calls from stepping it at once."""
    session: Session
    prompt_parts: list[tuple[str, bool]]
    lock: threading.Lock = field(default_factory=threading.Lock)


class LiveSessions:
    """Sessions by run token, least recently stepped first. Only the `cached_sessions()` most recent keep their
    KV caches (the memory); older ones keep their text and are dropped whole past `keep` entries. Either way
    the next step of that run rebuilds what it needs from its snapshot."""

    def __init__(self, keep: int = 256) -> None:
        self.keep = keep
        self._live: OrderedDict[str, Live] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: str) -> Live | None:
        with self._lock:
            return self._live.get(token)

    def put(self, token: str, live: Live) -> None:
        with self._lock:
            self._live[token] = live

    def touch(self, token: str) -> list[str]:
        """`token` was just stepped (its caller holds its lock): drop the caches of the least recently stepped
        beyond capacity (never one that is stepping now). Returns the tokens whose caches were dropped."""
        dropped = []
        with self._lock:
            if token in self._live:
                self._live.move_to_end(token)
            for i, (key, live) in enumerate(reversed(self._live.items())):
                if i >= cached_sessions() and key != token and live.session.tcache is not None \
                        and live.lock.acquire(blocking=False):
                    live.session.drop_caches()
                    live.lock.release()
                    dropped.append(key)
            while len(self._live) > self.keep:
                self._live.popitem(last=False)
        return dropped

    def forget(self, token: str | None) -> None:
        """The run is gone (Reset, a closed tab's state expired): free its session now."""
        with self._lock:
            live = self._live.pop(token, None) if token else None
        if live is not None and live.lock.acquire(blocking=False):
            live.session.drop_caches()
            live.lock.release()

    def has_caches(self, token: str) -> bool:
        live = self.get(token)
        return live is not None and live.session.tcache is not None


SESSIONS = LiveSessions()


@dataclass
class StepOutcome:
    """What one call of `run_steps` did: the new steps, their timings, where the run stands now."""
    traces: list[StepTrace]
    step_ms: list[float]
    prefixes: list[list[int]]  # committed ids before each of the steps
    snapshot: Snapshot
    prompt_parts: list[tuple[str, bool]]  # (text, added by the chat template?)
    output_text: str
    device: str
    rebuilt: bool
    head: dict | None = None  # an EAGLE-3 drafter's HeadInfo (dialect, taps and their rule, draft vocabulary)
    tally: PositionTally = field(default_factory=PositionTally)  # these steps' acceptance by draft position  # the session was rebuilt from the snapshot it was given (a cache miss on this side)


def session_for(cfg, token: str, snap: Snapshot | None) -> tuple[Live, bool]:
    """This run's live session, rebuilt when missing or not at `snap` (a fresh run when `snap` is None)."""
    live = SESSIONS.get(token)
    if live is not None and (snap is None and not live.session.traces and not live.session.steps_before
                             or snap is not None and take_snapshot(live.session) == snap):
        return live, False
    session, parts = new_session(cfg)
    if snap is not None:
        restore(session, snap)
    live = Live(session, parts)
    SESSIONS.put(token, live)
    return live, snap is not None


def steps_duration(cfg, token: str, snap: Snapshot | None, n: int = 1) -> float:
    """Seconds to reserve on a ZeroGPU worker for a rebuild (prefill) and `n` steps. Kept small: ZeroGPU charges
    the reservation (×1.5) against a visitor's daily quota (docs/spaces.md); a Hub model up to ~8B gets more."""
    small = cfg.target in ("", "embedded", *REAL_MODELS)
    return (5 + n) if small else (10 + 2 * n)


@gpu(duration=steps_duration)
def run_steps(cfg, token: str, snap: Snapshot | None, n: int = 1) -> StepOutcome:
    """Up to `n` steps of the run (fewer when it finishes), each timed around the engine call with any
    prefill taken out."""
    live, rebuilt = session_for(cfg, token, snap)
    if not live.lock.acquire(blocking=False):
        raise SessionError("a step is already running for this session")
    try:
        s = live.session
        if s.done:
            raise SessionError(f"generation has finished ({s.stop_reason}); reset to start again")
        traces, step_ms, prefixes = [], [], []
        while len(traces) < n and not s.done:
            prefixes.append(list(s.ids))
            step_ms.append(timed_step(s))
            traces.append(s.traces[-1])
        SESSIONS.touch(token)
        head, vocab = drafter_context(s.drafter)
        tally = PositionTally()
        tally.add(traces, vocab)
        return StepOutcome(traces, step_ms, prefixes, take_snapshot(s), live.prompt_parts,
                           s.target.tokenizer.decode(s.output_ids), str(s.target.device), rebuilt, head, tally)
    finally:
        live.lock.release()


@gpu(duration=10)
def static_step(cfg, prefix: list[int]) -> StepTrace:
    """One static-tree step drafted and verified from `prefix` in a throwaway session (the run's own text is
    untouched): the TALON view's side-by-side."""
    return new_session(cfg, prefix)[0].step()


@gpu(duration=20)
def load_pair(target: str, draft: str) -> str:
    """Load the chosen pair now, so the first Step does not pay for it; one line about it."""
    real = (target or "").strip() in REAL_MODELS
    t, d = get_models(target, draft, needs_draft=True, drafter="eagle3" if real else "model")
    drafted = "its EAGLE-3 head (trained here)" if real else f"draft '{draft or 'embedded'}' ({d.lm.num_layers} layers)"
    return (f"Loaded target '{target or 'embedded'}' ({model_label(target)}; {t.num_layers} layers, {len(t.tokenizer)} "
            f"tokens, {why_dtype(t.dtype, t.device)}) and {drafted}, on {t.device}.")


@gpu(duration=60)
def cost_curve(target: str, draft: str, drafter: str, fresh: bool = False) -> CostModel:
    """This machine's measured t_verify(n) and t_draft(width) for the pair and drafter (kept per device,
    model, dtype and drafter for a day; a measurement takes a few seconds); `fresh` measures anew."""
    tgt, instance = get_models(target, draft, True, drafter)
    return measure_costs(tgt, instance, progress=lambda line: print(line, flush=True), fresh=fresh)
