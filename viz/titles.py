"""Figure titles that fit a phone: Plotly never wraps a title, so a long one is cut at the figure's edge on a
390 px screen. Titles are joined from short parts with ' · '; past `width` characters a line breaks at the
next such joint (or at a space), and every line stays whole on a desktop too."""
from __future__ import annotations

import re

JOINT = " · "
TAGS = re.compile(r"<[^>]+>")


def wrap_title(title: str, width: int = 46) -> str:
    """'a · b · c' with '<br>' where a line would pass `width` visible characters (tags count as none)."""
    lines, line = [], ""
    for part in title.split(JOINT):
        candidate = f"{line}{JOINT}{part}" if line else part
        if line and len(TAGS.sub("", candidate)) > width:
            lines.append(line)
            line = part
        else:
            line = candidate
    lines.append(line)
    return "<br>".join(lines)
