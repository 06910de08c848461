"""Load and soak checks against a freshly launched app on loopback (bounded; a benchmark, not a test).

    python scripts/load_soak.py                       # defaults below; figures for README
    python scripts/load_soak.py --clients 4 --steps 3 --fresh 20 --no-soak

1. concurrent: N gradio_client sessions step different prompts at once; each text must equal the same
   steps run alone (one client at a time). Prints p50/p95 step latency under load and alone.
2. fresh sessions: M new API sessions step once each; prints the server's RSS before/after (must grow by
   at most --rss-limit-mb), then the first session steps again and must continue its own text.
3. soak: Play to the context limit: a long prompt stepped until the run stops; the stop must be "context"
   and the text must equal plain AR decoding of the target.
Exit status 1 when a check fails. The server's RSS is read from /proc/PID/status (Linux).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gradio_client import Client  # noqa: E402

from core.prompts import ASSET_PROMPTS, CHARS_PER_TOKEN_BOUND, read_prompts  # noqa: E402

KNOBS = dict(N=16, K=4, mu=0.05, k_init=1, shape_temperature=1.0)


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line")


class Server:
    """`python app.py` on 127.0.0.1 with its output in a temp log; stopped on exit."""

    def __init__(self, timeout_s: float = 120.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = tempfile.NamedTemporaryFile("w+", prefix="specscope-soak-", suffix=".log", delete=False)
        env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(self.port),
               "GRADIO_ANALYTICS_ENABLED": "False"}
        self.proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app.py exited early; see {self.log.name}")
            if time.perf_counter() - t0 > timeout_s:
                raise RuntimeError("app.py did not serve the page in time")
            try:
                with urllib.request.urlopen(self.url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def step(client: Client, prompt: str, max_new: int) -> tuple[dict, float]:
    """One /talon_step call: (the step's trace, seconds)."""
    t0 = time.perf_counter()
    out = client.predict(prompt, *KNOBS.values(), 0.0, 0, max_new, "embedded", "embedded", True,
                         api_name="/talon_step")  # N K μ k T_shape, temperature seed max_new, target draft pruned
    return out[-1], time.perf_counter() - t0


def exported(client: Client) -> dict:
    return client.predict(api_name="/export_talon")[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(label: str, secs: list[float]) -> str:
    return f"{label}: {len(secs)} steps, p50 {pct(secs, 0.5) * 1000:.0f} ms, p95 {pct(secs, 0.95) * 1000:.0f} ms"


def run_alone(url: str, prompt: str, steps: int, max_new: int) -> tuple[list[int], list[float]]:
    client = Client(url, verbose=False)
    secs = [step(client, prompt, max_new)[1] for _ in range(steps)]
    return exported(client)["output_ids"], secs


def concurrent(url: str, prompts: list[str], steps: int, max_new: int) -> bool:
    results: dict[int, tuple[list[int], list[float]]] = {}
    errors: list[str] = []

    def work(i: int) -> None:
        try:
            results[i] = run_alone(url, prompts[i], steps, max_new)
        except Exception as exc:  # noqa: BLE001 - reported with the others below
            errors.append(f"client {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    wall = time.perf_counter() - t0
    alone = [run_alone(url, p, steps, max_new) for p in prompts]
    same = sum(results.get(i, ([None], []))[0] == alone[i][0] for i in range(len(prompts)))
    print(f"[concurrent] {len(prompts)} clients x {steps} steps in {wall:.1f} s; texts equal to the same steps "
          f"run alone: {same}/{len(prompts)}")
    print("  " + latency("under load", [s for _, secs in results.values() for s in secs]))
    print("  " + latency("alone", [s for _, secs in alone for s in secs]))
    for e in errors:
        print("  error:", e)
    return same == len(prompts) and not errors


def fresh_sessions(server: Server, prompts: list[str], n: int, max_new: int, limit_mb: float) -> bool:
    before = rss_mb(server.proc.pid)
    first = Client(server.url, verbose=False)
    step(first, prompts[0], max_new)
    secs = []
    for i in range(1, n):
        secs.append(step(Client(server.url, verbose=False), prompts[i % len(prompts)], max_new)[1])
    after = rss_mb(server.proc.pid)
    step(first, prompts[0], max_new)  # its caches were evicted long ago: it re-prefills and continues
    again = exported(first)
    ref, _ = run_alone(server.url, prompts[0], 2, max_new)
    grew = after - before
    continues = again["output_ids"] == ref and len(again["steps"]) == 2
    print(f"[fresh] {n} new sessions stepping once: server RSS {before:.0f} -> {after:.0f} MB (+{grew:.0f} MB, "
          f"limit {limit_mb:.0f}); first session stepped again and continued its own text: {continues}")
    print("  " + latency("fresh-session steps", secs))
    return grew <= limit_mb and continues


def soak(url: str, prompt_tokens: int, max_new: int) -> bool:
    """Step one long prompt until the run stops, like Play; compare with AR decoding in this process."""
    from core.engine import Session
    from core.model.loading import DEFAULT_TARGET, load_model
    from core.methods import build_method
    target = load_model(DEFAULT_TARGET, "cpu")
    text = "\n".join(r["prompt"] for r in read_prompts(ASSET_PROMPTS))
    ids = target.tokenizer(text[:CHARS_PER_TOKEN_BOUND * prompt_tokens])["input_ids"][:prompt_tokens]
    prompt = target.tokenizer.decode(ids)
    client, steps, t0 = Client(url, verbose=False), 0, time.perf_counter()
    while steps < 2 * max_new:
        trace, _ = step(client, prompt, max_new)
        steps += 1
        if trace["stop_reason"]:
            break
    data = exported(client)
    ar = Session(target, build_method("ar"), data["config"]["prompt"], max_new_tokens=max_new).generate()
    ok = data["stop_reason"] == "context" and data["output_ids"] == ar.output_ids
    print(f"[soak] {len(ids)}-token prompt, max new {max_new}: {steps} steps in {time.perf_counter() - t0:.1f} s, "
          f"stop {data['stop_reason']!r}, {len(data['output_ids'])} tokens; equal to AR: "
          f"{data['output_ids'] == ar.output_ids} (AR stop {ar.stop_reason!r})")
    return ok


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=6, help="concurrent sessions (1..32)")
    ap.add_argument("--steps", type=int, default=4, help="steps per concurrent session (1..32)")
    ap.add_argument("--fresh", type=int, default=60, help="fresh sessions stepping once (1..200)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--rss-limit-mb", type=float, default=400.0)
    ap.add_argument("--soak-prompt-tokens", type=int, default=900)
    ap.add_argument("--no-soak", action="store_true")
    args = ap.parse_args(argv)
    if not (1 <= args.clients <= 32 and 1 <= args.steps <= 32 and 1 <= args.fresh <= 200):
        ap.error("keep it bounded: --clients 1..32, --steps 1..32, --fresh 1..200")
    prompts = [r["prompt"] for r in read_prompts(ASSET_PROMPTS)]
    settings = {k: v for k, v in os.environ.items() if k.startswith(("SPECSCOPE_", "OMP_"))}
    print(f"load_soak: talon N={KNOBS['N']} K={KNOBS['K']} μ={KNOBS['mu']}, greedy; env {settings or '{}'}")
    server = Server()
    try:
        warm = Client(server.url, verbose=False)
        step(warm, prompts[0], 4)  # pay the first-call costs before measuring
        print(f"[start] server pid {server.proc.pid}, RSS {rss_mb(server.proc.pid):.0f} MB after one warm-up step")
        ok = concurrent(server.url, prompts[1:1 + args.clients], args.steps, args.max_new_tokens)
        ok &= fresh_sessions(server, prompts, args.fresh, args.max_new_tokens, args.rss_limit_mb)
        if not args.no_soak:
            ok &= soak(server.url, args.soak_prompt_tokens, 256)
        print(f"[end] server RSS {rss_mb(server.proc.pid):.0f} MB; all checks {'passed' if ok else 'FAILED'}")
    finally:
        server.stop()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
