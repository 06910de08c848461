"""The training corpus of the embedded models: Python source of the running interpreter's standard library.

Files are split into train / held-out by a hash of their relative path, so the split is
the same on every machine that has the same standard library, whatever the file order.
"""
from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

HELDOUT_MODULUS = 25  # about 4% of files are held out
MAX_FILE_BYTES = 400_000  # skips generated data files such as pydoc_data/topics.py
SKIP_PARTS = {"site-packages", "encodings", "pydoc_data", "__pycache__"}


@dataclass(frozen=True)
class SourceFile:
    relpath: str
    path: Path

    @property
    def heldout(self) -> bool:
        digest = hashlib.sha1(self.relpath.encode()).digest()
        return int.from_bytes(digest[:4], "little") % HELDOUT_MODULUS == 0

    @property
    def is_test(self) -> bool:
        return self.relpath.startswith(("test/", "idlelib/idle_test/", "unittest/test/")) or "/test" in self.relpath

    def read(self) -> str:
        return self.path.read_text(encoding="utf-8", errors="replace")


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def source_files(root: Path | None = None) -> list[SourceFile]:
    """All usable .py files under the stdlib, sorted by relative path."""
    root = root or stdlib_root()
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if SKIP_PARTS.intersection(rel.split("/")) or path.stat().st_size > MAX_FILE_BYTES:
            continue
        out.append(SourceFile(rel, path))
    return out


def split(files: list[SourceFile]) -> tuple[list[SourceFile], list[SourceFile]]:
    """(train, held-out) lists; held-out keeps only library code, not test suites."""
    train = [f for f in files if not f.heldout]
    heldout = [f for f in files if f.heldout and not f.is_test]
    return train, heldout
