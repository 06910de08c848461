"""HTTP rules the page's own wiring cannot express, as one small ASGI middleware.

Deep links: Gradio serves `/gradio_api/deep_link` whether or not an app offers a deep-link button, and a page
opened with `?deep_link=…` replays the saved session's *rendered outputs* (figures and HTML panels) into the
visitor's page. This app has no deep-link button: its "Copy link" carries a run's settings only (ui/share.py),
which are checked when the page loads. So the endpoint is refused, and a page address carrying `deep_link` is
redirected to the same address without it (the other parameters, e.g. a shared link's knobs, are kept)."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

DEEP_LINK_API = "/gradio_api/deep_link"


class DeepLinkGuard:
    """ASGI middleware: refuses Gradio's deep-link API and strips `deep_link` from page requests."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if path.rstrip("/").endswith(DEEP_LINK_API):
            return await respond(send, 404, b"deep links are off on this server: use 'Copy link' for settings")
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if any(k == "deep_link" for k, _ in query):
            kept = urlencode([(k, v) for k, v in query if k != "deep_link"])
            where = (scope.get("root_path", "") + path) + (f"?{kept}" if kept else "")
            return await respond(send, 303, b"", [(b"location", where.encode("latin-1"))])
        return await self.app(scope, receive, send)


async def respond(send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
