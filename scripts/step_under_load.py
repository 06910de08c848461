"""Does a visitor's Step wait behind long jobs? A benchmark against a freshly launched app on loopback (not a
test: it times things). Figures for README's Hosting section.

    OMP_NUM_THREADS=1 python scripts/step_under_load.py            # nothing else running on the machine

1. alone: one client steps TALON `--steps` times; the median Step round trip.
2. under load: two other clients each start a maximum-size Tune (5 prompts × 64 tokens × 18 cells); while
   they run, the first client steps again; the median round trip and its ratio to alone.
The Tunes are cancelled afterwards. Exit status 1 when the ratio exceeds --max-ratio.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gradio_client import Client  # noqa: E402

from ui.examples import example_prompts  # noqa: E402
from ui.server import launched_app  # noqa: E402
from ui.sweeps import SWEEPS  # noqa: E402

KNOBS = (16, 4, 0.05, 1, 1.0, 0.0, 0, 256, "embedded", "embedded", True)  # N K μ k T_shape T seed max_new ...


def step_ms(client: Client, prompt: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.predict(prompt, *KNOBS, api_name="/talon_step")
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--max-ratio", type=float, default=2.0)
    args = ap.parse_args()
    prompt = example_prompts()[0]
    with launched_app(timeout_s=180) as (url, _):
        me = Client(url, verbose=False)
        step_ms(me, prompt, 2)  # warm: the run's first step loads nothing else
        alone = step_ms(me, prompt, args.steps)
        kind = list(SWEEPS)[0]
        s = SWEEPS[kind]
        tuners = [Client(url, verbose=False) for _ in range(2)]
        jobs = [c.submit(kind, s.xs, s.ys, 5, 64, "embedded", "embedded", "eagle3", api_name="/sweep") for c in tuners]
        time.sleep(5)  # both queued, the first one running
        loaded = step_ms(me, prompt, args.steps)
        running = [j.status().code.name for j in jobs]
        for c in tuners:
            c.predict(api_name="/sweep_cancel")
    a, b = statistics.median(alone), statistics.median(loaded)
    print("| Step round trip (TALON, N = 16, embedded pair) | median ms | p90 ms |")
    print("|---|---|---|")
    print(f"| alone | {a:.0f} | {statistics.quantiles(alone, n=10)[-1]:.0f} |")
    print(f"| with two maximum-size Tunes submitted ({', '.join(running)}) | {b:.0f} | "
          f"{statistics.quantiles(loaded, n=10)[-1]:.0f} |")
    print(f"\nratio under load / alone: {b / a:.2f}× (limit {args.max_ratio:g}×)")
    sys.exit(0 if b / a <= args.max_ratio else 1)


if __name__ == "__main__":
    main()
