"""Time the app as a visitor feels it: cold start (`python app.py` until the page is served) and the
round-trip of one TALON Step at default knobs through the API (first step, then warm steps).

    python scripts/bench_app.py [--steps 5]

Prints numbers; asserts nothing."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gradio_client import Client  # noqa: E402

from ui.server import launched_app  # noqa: E402
from ui.examples import default_prompt  # noqa: E402
from ui.knobs import SAMPLING_KNOBS, TALON_KNOBS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5, help="warm steps to time after the first")
    args = ap.parse_args()
    knobs = [k.default for k in TALON_KNOBS + SAMPLING_KNOBS]
    with launched_app() as (url, cold_s):
        client = Client(url, verbose=False)
        times = []
        for _ in range(1 + args.steps):
            t0 = time.perf_counter()
            trace = client.predict(default_prompt(), *knobs, "embedded", "embedded", True, api_name="/talon_step")[-1]
            times.append(time.perf_counter() - t0)
    print(f"cold start (python app.py -> page served): {cold_s:.1f} s")
    print(f"first Step round-trip (TALON, default knobs): {times[0] * 1000:.0f} ms")
    if len(times) > 1:
        print(f"warm Step round-trip, median of {len(times) - 1}: {statistics.median(times[1:]) * 1000:.0f} ms "
              f"(last step: {len(trace['nodes'])} nodes, τ = {trace['tau']}, δ = {trace['delta']})")


if __name__ == "__main__":
    main()
