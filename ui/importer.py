"""Import of an exported trace (the JSON that Export writes, ui/run.py `Run.export`): read it back into
StepTrace records and hold it as a run that can only be replayed.

Why a separate kind of run: an imported trace was measured elsewhere, has no engine session to step and
no AR baseline of this machine, so it must never be mistaken for a live run. It keeps the visitor's live
run (if any) and hands it back on their next Step. Every problem with the file is one ValueError line."""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from core.trace import StepTrace, TraceFormatError
from ui.run import Run, RunConfig
from core.metrics import RunStats, run_stats

CONFIG_KEYS = ("method", "prompt", "temperature", "seed", "max_new_tokens", "target", "draft", "drafter")
HOW = "export a run with “Export trace JSON” and import that file"


class BadTrace(ValueError):
    """The file is not an exported SpecScope trace of the expected method (the message says why)."""


def max_bytes() -> int:
    """Largest file accepted (SPECSCOPE_IMPORT_MAX_MB, default 20): a 256-token export is well under it."""
    value = os.environ.get("SPECSCOPE_IMPORT_MAX_MB", "").strip()
    return int(float(value) * 2**20) if value.replace(".", "", 1).isdigit() else 20 * 2**20


def step_from_dict(d, i: int) -> StepTrace:
    """One exported step read back (core/trace.py), its problems in the visitor's words."""
    try:
        return StepTrace.from_dict(d, f"step {i + 1}")
    except TraceFormatError as exc:
        raise BadTrace(f"not a SpecScope trace: {exc}; {HOW}") from None


def read_json(path: str | Path) -> dict:
    """The file's JSON object, refused early when it is too big or not JSON."""
    p = Path(path)
    size = p.stat().st_size
    if size > max_bytes():
        raise BadTrace(f"the file is {size / 2**20:.1f} MB; an exported trace is at most "
                       f"{max_bytes() / 2**20:.0f} MB here")
    try:
        data = json.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise BadTrace(f"the file is not text (not UTF-8 JSON); {HOW}") from None
    except json.JSONDecodeError as exc:
        raise BadTrace(f"the file is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); {HOW}") from None
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict) or not isinstance(data.get("steps"), list):
        raise BadTrace(f"not a SpecScope trace: it needs a config and a list of steps; {HOW}")
    return data


def config_from_dict(c: dict) -> RunConfig:
    knobs = tuple((k, v) for k, v in c.items() if k not in CONFIG_KEYS)
    try:
        return RunConfig(str(c["method"]), str(c.get("prompt", "")), knobs, float(c.get("temperature", 0.0)),
                         int(c.get("seed", 0)), int(c.get("max_new_tokens", 0)), str(c.get("target", "embedded")),
                         str(c.get("draft", "embedded")), str(c.get("drafter") or "model"))
    except (KeyError, TypeError, ValueError) as exc:
        raise BadTrace(f"not a SpecScope trace: its config is unusable ({exc}); {HOW}") from None


@dataclass
class ImportedRun:
    """A run read from an exported trace: replay only. `live` is the visitor's own run, kept for their
    next Step. Duck-types the parts of Run that the views read."""
    config: RunConfig
    traces: list[StepTrace]
    shadows: dict[int, StepTrace]
    step_ms: list[float]
    output_ids: list[int]
    prompt: str
    data: dict
    name: str
    live: Run | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    session = None  # no engine, no caches
    done = True
    label = " · imported trace"

    def __deepcopy__(self, memo) -> "ImportedRun":
        return self

    @property
    def note(self) -> str:
        return (f"Imported trace “{self.name}”: {len(self.traces)} {self.config.method.upper()} steps measured "
                f"where it was exported (its timings, not this machine's). Use the replay slider or ← / →; "
                f"Step goes back to your own live run.")

    def prompt_text(self) -> str:
        return self.prompt

    def stats(self) -> RunStats:
        return run_stats(self.traces, self.step_ms, self.output_ids, self.config.sampling.greedy, None, True)

    def export(self) -> dict:
        return self.data


def import_trace(path: str | Path | None, method: str, live: Run | None = None) -> ImportedRun:
    """Read an exported trace of `method` (talon | specbound); BadTrace says what is wrong with it."""
    if not path:
        raise BadTrace(f"no file: {HOW}")
    data = read_json(path)
    got = data["config"].get("method")
    if got != method:
        where = {"talon": "the TALON tab", "specbound": "the SpecBound tab"}.get(got)
        hint = f"; import it in {where}" if where else ""
        raise BadTrace(f"this is a {got!r} trace, not a {method} one{hint}")
    steps = [step_from_dict(d, i) for i, d in enumerate(data["steps"])]
    if not steps:
        raise BadTrace("the trace has no steps to replay")
    if any(s.method != method for s in steps):
        raise BadTrace(f"the trace mixes methods: every step must be a {method} step")
    shadows_in = data.get("static_shadows") or {}
    if not isinstance(shadows_in, dict):
        raise BadTrace(f"not a SpecScope trace: static_shadows is not an object; {HOW}")
    try:
        shadows = {int(k): step_from_dict(v, int(k)) for k, v in shadows_in.items()}
        step_ms = [float(x) for x in data.get("step_ms") or []]
        output_ids = [int(x) for x in data.get("output_ids") or []]
    except (TypeError, ValueError):
        raise BadTrace(f"not a SpecScope trace: its timings, token ids or shadows are malformed; {HOW}") from None
    prompt = data.get("prompt_text")
    cfg = config_from_dict(data["config"])
    return ImportedRun(cfg, steps, shadows, step_ms, output_ids, prompt if isinstance(prompt, str) else cfg.prompt,
                       data, Path(path).name, live)
