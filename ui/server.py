"""Launch `python app.py` on a free port (for the client and browser tests and the scripts that drive a
browser), and stop it afterwards.

Why a log file and not a pipe: nobody reads the server's output while it runs, and a pipe that fills (64 KiB)
blocks the server's next print; the file also keeps what the server said for a test that failed (its path is
printed when the server stops)."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def launched_app(timeout_s: float = 90.0, env: dict[str, str] | None = None):
    """Yields (url, seconds until the page was served); `env`: extra environment for the server."""
    port = free_port()
    env = {**os.environ, **(env or {}), "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False"}
    t0 = time.perf_counter()
    log = tempfile.NamedTemporaryFile("w+", prefix="specscope-app-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"app.py exited early:\n{Path(log.name).read_text()[-4000:]}")
            if time.perf_counter() - t0 > timeout_s:
                raise RuntimeError("app.py did not serve the page in time")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield url, time.perf_counter() - t0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        print(f"the app's output: {log.name}")
