"""Import of an exported trace (the JSON that Export writes, ui/run.py `Run.export`): read it back into
StepTrace records and hold it as a run that can only be replayed.

Why a separate kind of run: an imported trace was measured elsewhere, has no engine session to step and
no AR baseline of this machine, so it must never be mistaken for a live run. It keeps the visitor's live
run (if any) and hands it back on their next Step. Every problem with the file is one ValueError line."""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from core.eagle3.readout import CompatReadout, compat_readout
from core.metrics import RunStats, run_stats
from core.trace import StepTrace, TraceFormatError
from core.trace_check import TraceLimits, size
from ui.config import RunConfig
from ui.run import Run

CONFIG_KEYS = ("method", "prompt", "temperature", "seed", "max_new_tokens", "target", "draft", "drafter", "chat")
HOW = "export a run with “Export trace JSON” and import that file"
LIMITS = TraceLimits()


class BadTrace(ValueError):
    """The file is not an exported SpecScope trace of the expected method (the message says why)."""


def max_bytes() -> int:
    """Largest file accepted (SPECSCOPE_IMPORT_MAX_MB, default 20): a 256-token export is well under it."""
    value = os.environ.get("SPECSCOPE_IMPORT_MAX_MB", "").strip()
    return int(float(value) * 2**20) if value.replace(".", "", 1).isdigit() else 20 * 2**20


def step_from_dict(d, i: int, limits: TraceLimits = LIMITS) -> StepTrace:
    """One exported step read back and checked field by field (core/trace_check.py), its problems in the
    visitor's words."""
    try:
        return StepTrace.from_dict(d, f"step {i + 1}", limits)
    except TraceFormatError as exc:
        raise BadTrace(f"not a SpecScope trace: {exc}; {HOW}") from None


def read_json(path: str | Path) -> dict:
    """The file's JSON object, refused early when it is too big, not JSON or nested deeper than a trace."""
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
    except RecursionError:
        raise BadTrace(f"the file nests its JSON far deeper than a trace does; {HOW}") from None
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict) or not isinstance(data.get("steps"), list):
        raise BadTrace(f"not a SpecScope trace: it needs a config and a list of steps; {HOW}")
    return data


def config_from_dict(c: dict) -> RunConfig:
    """The run's settings: a few named values, each a number, a short text or nothing."""
    knobs = tuple((k, v) for k, v in c.items() if k not in CONFIG_KEYS)
    if len(c) > 64 or any(not isinstance(k, str) or len(k) > 32 for k in c):
        raise BadTrace(f"not a SpecScope trace: its config has unexpected entries; {HOW}")
    for k, v in c.items():
        if not (v is None or isinstance(v, (bool, int, float, str))) or isinstance(v, str) and len(v) > 100_000:
            raise BadTrace(f"not a SpecScope trace: its config's {k[:32]!r} is not a plain value; {HOW}")
    try:
        return RunConfig(str(c["method"]), str(c.get("prompt", "")), knobs, float(c.get("temperature", 0.0)),
                         int(c.get("seed", 0)), int(c.get("max_new_tokens", 0)), str(c.get("target", "embedded")),
                         str(c.get("draft", "embedded")), str(c.get("drafter") or "model"), str(c.get("chat", "auto")))
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise BadTrace(f"not a SpecScope trace: its config is unusable ({exc}); {HOW}") from None


def read_steps(items: list, limits: TraceLimits) -> list[StepTrace]:
    """Every step, refused as soon as the file claims more steps or records than a run could hold."""
    if len(items) > limits.max_steps:
        raise BadTrace(f"the trace has {len(items)} steps; a run here has at most {limits.max_steps}")
    steps, records = [], 0
    for i, d in enumerate(items):
        steps.append(step_from_dict(d, i, limits))
        records += size(steps[-1])
        if records > limits.max_records:
            raise BadTrace(f"the trace holds more than {limits.max_records} nodes, levels and exits in all; "
                           f"an export of a run here holds far fewer")
    return steps


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
    output_text: str
    stop_reason: str | None
    name: str
    extras: dict  # the export's descriptive fields (chat_applied, head, compat), checked as small plain data
    live: Run | None = None
    retired: bool = False
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

    def prompt_parts(self) -> list[tuple[str, bool]]:
        return [(self.prompt, False)]

    def readout(self) -> CompatReadout:
        """From the steps, with the file's head description and the draft-vocabulary coverage its export
        recorded (the vocabulary itself is not exported)."""
        head = self.extras.get("head") if isinstance(self.extras.get("head"), dict) else None
        compat = self.extras.get("compat") if isinstance(self.extras.get("compat"), dict) else {}
        coverage = compat.get("coverage")
        ok = isinstance(coverage, (int, float)) and not isinstance(coverage, bool) and 0 <= coverage <= 1
        return compat_readout(self.traces, head, coverage=float(coverage) if ok else None)

    def forget(self) -> None:
        """Nothing to free: an imported trace has no engine session."""

    def stats(self) -> RunStats:
        stats = run_stats(self.traces, self.step_ms, self.output_ids, self.config.sampling.greedy, None, True)
        stats.timed_here = False
        return stats

    def export(self) -> dict:
        """The file as it was read (its known fields): only the checked traces are kept, not the JSON."""
        return {"config": self.config.as_dict(), "prompt_text": self.prompt, "output_text": self.output_text,
                "output_ids": list(self.output_ids), "stop_reason": self.stop_reason, "step_ms": list(self.step_ms),
                "steps": [t.to_dict() for t in self.traces],
                "static_shadows": {str(i): t.to_dict() for i, t in self.shadows.items()}, **self.extras}


def import_trace(path: str | Path | None, method: str, live: Run | None = None,
                 limits: TraceLimits = LIMITS) -> ImportedRun:
    """Read an exported trace of `method` (talon | specbound); BadTrace says what is wrong with it. Nothing
    renders or allocates from a field before it is checked."""
    if not path:
        raise BadTrace(f"no file: {HOW}")
    data = read_json(path)
    got = data["config"].get("method")
    if got != method:
        where = {"talon": "the TALON tab", "specbound": "the SpecBound tab"}.get(got)
        hint = f"; import it in {where}" if where else ""
        named = f"{got!r}" if isinstance(got, str) and len(got) <= 32 else "another kind of"
        raise BadTrace(f"this is a {named} trace, not a {method} one{hint}")
    cfg = config_from_dict(data["config"])
    steps = read_steps(data["steps"], limits)
    if not steps:
        raise BadTrace("the trace has no steps to replay")
    if any(s.method != method for s in steps):
        raise BadTrace(f"the trace mixes methods: every step must be a {method} step")
    shadows = read_shadows(data.get("static_shadows") or {}, len(steps), limits)
    step_ms = plain_list(data.get("step_ms"), float, len(steps), "timings")
    output_ids = plain_list(data.get("output_ids"), int, limits.max_steps * (limits.max_nodes + 1), "token ids")
    texts = [data.get(k) if isinstance(data.get(k), str) else "" for k in ("prompt_text", "output_text")]
    stop = data.get("stop_reason") if isinstance(data.get("stop_reason"), str) else None
    extras = {k: data[k] for k in EXTRAS if k in data and small_plain(data[k])}
    return ImportedRun(cfg, steps, shadows, step_ms, output_ids, texts[0] or cfg.prompt, texts[1], stop,
                       Path(path).name, extras, live)


EXTRAS = ("chat_applied", "head", "compat")  # re-exported as read; head and compat's coverage feed the imported
# run's compatibility readout, every value escaped there (viz/html.compat_html)


def small_plain(value, depth: int = 0) -> bool:
    """JSON of plain values, at most 3 levels deep and 256 entries a level, texts of at most 256 characters."""
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return len(value) <= 256
    items = list(value.items()) if isinstance(value, dict) else value if isinstance(value, list) else None
    if items is None or depth >= 3 or len(items) > 256:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and len(k) <= 64 and small_plain(v, depth + 1) for k, v in items)
    return all(small_plain(v, depth + 1) for v in items)


def read_shadows(items, n_steps: int, limits: TraceLimits) -> dict[int, StepTrace]:
    """The static trees drawn beside steps: one per step at most, keyed by the step's index."""
    if not isinstance(items, dict) or len(items) > n_steps:
        raise BadTrace(f"not a SpecScope trace: static_shadows is not one object per step; {HOW}")
    out = {}
    for k, v in items.items():
        if not (isinstance(k, str) and k.isdigit() and int(k) < n_steps):
            raise BadTrace(f"not a SpecScope trace: static_shadows names a step it does not have; {HOW}")
        out[int(k)] = step_from_dict(v, int(k), limits)
    return out


def plain_list(items, kind: type, most: int, what: str) -> list:
    """A list of finite numbers of one kind (timings, token ids), at most `most` long."""
    items = items or []
    ok = isinstance(items, list) and len(items) <= most and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and (kind is float or x == int(x))
        for x in items)
    if not ok:
        raise BadTrace(f"not a SpecScope trace: its {what} are malformed; {HOW}")
    return [kind(x) for x in items]
