"""Cost curves on disk: one JSON file per (device, model, dtype, drafter), read back only while it still
describes this machine. A curve measured under someone else's load, on another CPU, another torch or another
thread count is wrong for `auto` and for the page, so a file expires after a day (SPECSCOPE_COST_MAX_AGE_S)
and whenever the machine's fingerprint differs from the one it was measured on."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import stat
import tempfile
import time
from pathlib import Path

import torch

DEFAULT_MAX_AGE_S = 24 * 3600.0


def max_age_s() -> float:
    """How long a measured curve is trusted (memory and disk); SPECSCOPE_COST_MAX_AGE_S overrides a day."""
    value = os.environ.get("SPECSCOPE_COST_MAX_AGE_S", "").strip()
    try:
        return float(value) if value else DEFAULT_MAX_AGE_S
    except ValueError:
        return DEFAULT_MAX_AGE_S


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint(device: str) -> str:
    """What a curve's timings depend on besides the model: the processor, the cores and threads torch uses,
    torch's version and, on a GPU, its name."""
    gpu = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else ""
    parts = [_cpu_model(), f"{os.cpu_count()} cpus", f"{torch.get_num_threads()} threads", f"torch {torch.__version__}",
             gpu]
    return " · ".join(p for p in parts if p)


def path_for(folder: Path, key: str) -> Path:
    return folder / f"cost-{hashlib.sha1(key.encode()).hexdigest()[:16]}.json"


def fresh_enough(data: dict, machine: str, now: float | None = None) -> bool:
    """A stored curve may be used: measured on this machine, less than max_age_s() ago."""
    age = (time.time() if now is None else now) - float(data.get("measured_at") or 0)
    return data.get("fingerprint") == machine and 0 <= age < max_age_s()


MAX_BYTES = 1 << 20  # a plan or curve is a few kB; anything larger is not ours


def load(path: Path, machine: str) -> dict | None:
    """The stored fields, or None when missing, not a regular file (a FIFO would block the read, a link may point
    anywhere), larger than any file of ours, unreadable, stale or from another machine. The caller still
    checks every field it reads (a valid JSON file is not a valid plan)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read(MAX_BYTES + 1))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and fresh_enough(data, machine) else None


def save(path: Path, data: dict) -> None:
    """Written whole or not at all: into a temporary file beside it, then renamed over it (a rename replaces a
    link or anything else at the path itself, never what a link points to)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cost-", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: the in-memory copy still serves this process
