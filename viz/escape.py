"""The one way a value reaches HTML: whatever its type (a token's text, a number read from an imported file,
a reason line), it is turned into text and escaped, quotes included, so nothing in the data becomes markup
or an attribute. Plotly text (labels, hovers, ticks, titles) goes through `plot_text` instead: Plotly reads
tags there but turns back only a few entities (&amp; &lt; &gt; and numeric ones, not &quot;), so a quote
escaped for HTML would be drawn as the six characters '&quot;'."""
from __future__ import annotations

from html import escape


def esc(value: object, quote: bool = True) -> str:
    """Any value as HTML-safe text ('<b>' -> '&lt;b&gt;', a quote -> '&quot;'). quote=False leaves quotes as
    they are: enough for element content (a toast's message), never for an attribute."""
    return escape(str(value), quote=quote)


def num(value: object, spec: str = ".2f", suffix: str = "") -> str:
    """A number formatted with `spec`, escaped; '—' when absent, the value's own (escaped) text when it is not
    a number, so a renderer never fails or leaks markup on a malformed value."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return esc(value)
    return esc(f"{value:{spec}}{suffix}")


def plot_text(value: object) -> str:
    """Any value as text for a Plotly label, hover, tick or title: '<', '>' and '&' escaped, so nothing in the
    data becomes a tag, and quotes left as they are (outside a tag Plotly draws them as they are, and
    '&quot;', which Plotly does not decode, would show literally)."""
    return escape(str(value), quote=False)
