"""What a visitor may read of a server-side message: never a path on the server. A model's folder, a cache file
or the repository's own location says nothing a visitor can act on and tells them how the server is laid out,
so every message that reaches the page (ui/handlers.user_error, the one place errors become toasts) is passed
through `no_paths`; the server log keeps the message whole."""
from __future__ import annotations

import re
from pathlib import Path

from core.eagle3.loading import DEFAULT_HEAD
from core.model.loading import DEFAULT_DRAFT, DEFAULT_TARGET

SERVER_PATH = "(a path on the server)"
# an absolute POSIX path (or ~/…) not inside a word, a URL, a closing tag or a ratio such as tokens/s; a Windows
# drive path
POSIX = re.compile(r"(?<![\w.:/~<-])~?/[A-Za-z0-9_.][^\s'\"`,;:()<>\[\]{}]*")
WINDOWS = re.compile(r"\b[A-Za-z]:\\[^\s'\"`,;:()<>\[\]{}]*")
# the embedded models' own folders: the page calls them 'embedded'
PAGE_NAMES = {str(Path(p)): "embedded" for p in (DEFAULT_TARGET, DEFAULT_DRAFT, DEFAULT_HEAD)}


def no_paths(text: str) -> str:
    """`text` with the embedded models' folders named as the page names them and every other absolute path
    replaced by SERVER_PATH."""
    for path, name in PAGE_NAMES.items():
        text = text.replace(path, name)
    return WINDOWS.sub(SERVER_PATH, POSIX.sub(SERVER_PATH, text))
