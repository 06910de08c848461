"""Export files without leaks: each server process writes into its own temp folder, removed at exit, and
every export first deletes this process's files older than SPECSCOPE_EXPORT_TTL_S. Gradio copies a
returned file into its own cache before serving it (cleaned by Blocks(delete_cache=...)), so ours are
only needed for a moment."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

_DIR: Path | None = None
_LOCK = threading.Lock()


def export_ttl_s() -> float:
    value = os.environ.get("SPECSCOPE_EXPORT_TTL_S", "").strip()
    return float(value) if value.replace(".", "", 1).isdigit() else 600.0


def export_dir() -> Path:
    """This process's folder, made on first use and removed when the process exits."""
    global _DIR
    with _LOCK:
        if _DIR is None or not _DIR.is_dir():
            _DIR = Path(tempfile.mkdtemp(prefix="specscope-exports-"))
            atexit.register(shutil.rmtree, _DIR, True)
        return _DIR


def prune(folder: Path, max_age_s: float, now: float | None = None) -> int:
    """Delete files in `folder` older than max_age_s; returns how many went."""
    now = time.time() if now is None else now
    gone = 0
    for path in folder.glob("*.json"):
        try:
            if now - path.stat().st_mtime > max_age_s:
                path.unlink()
                gone += 1
        except FileNotFoundError:  # another thread pruned it first
            continue
    return gone


def write_export(data: dict) -> str:
    """Write the export as JSON and return its path, after clearing this process's stale exports."""
    folder = export_dir()
    prune(folder, export_ttl_s())
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="specscope-trace-", dir=folder, delete=False,
                                     encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    return f.name
