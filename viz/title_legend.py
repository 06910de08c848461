"""A figure's title and legend stacked in its top margin, in pixels, so neither is ever drawn over the other.

Why pixels: Plotly places a title in the top margin and a horizontal legend just above the plot, each on
its own; a two-line title (a phone wraps most titles) and a legend that wraps to a second row then share the
same strip. Here the title hangs from the top of the figure, the legend from just under the title, each entry a
third of its width from the figure's left edge (so the rows are known without knowing the screen's width: the
labels are short enough for a phone's third), and the top margin is their sum. tests/test_browser_access.py measures both boxes in Chromium.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from viz.titles import wrap_title

TITLE_LINE_PX = 20  # one line of a 14 px title
LEGEND_ROW_PX = 22  # one row of an 11 px legend
PER_ROW = 3  # legend entries per row, each a third of the legend's width: ~88 px on a 390 px phone
GAP_PX = 6
MULTILINE_PX = 10  # plotly.js sets a title of several lines this much higher than its top anchor says


def legend_entries(fig: go.Figure) -> int:
    """Traces the legend lists: named, and not hidden from it."""
    return sum(1 for t in fig.data if t.name and t.showlegend is not False)


def stack_top(fig: go.Figure, title: str, height: int) -> None:
    """Title (wrapped for a phone) at the top, the legend below it, the plot below both."""
    text = wrap_title(title)
    lines = text.count("<br>") + 1 if title else 0
    title_px = GAP_PX + TITLE_LINE_PX * lines
    rows = math.ceil(legend_entries(fig) / PER_ROW)
    legend_px = LEGEND_ROW_PX * rows
    fig.update_layout(
        title=dict(text=text, x=0.01, xanchor="left", y=1, yref="container", yanchor="top",
                   pad=dict(t=GAP_PX + (MULTILINE_PX if lines > 1 else 0)), font=dict(size=14)),
        legend=dict(orientation="h", x=0.01, xref="container", xanchor="left", y=1 - (title_px + GAP_PX) / height, yref="container",
                    yanchor="top", entrywidth=1 / PER_ROW, entrywidthmode="fraction", font=dict(size=10)),
        margin=dict(t=title_px + legend_px + 2 * GAP_PX + 8))
