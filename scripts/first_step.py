"""What a visitor waits for: the page's first TALON and SpecBound Step on the model it opens on, after the
server's start-up loads (`preload`), at the page's default knobs and example prompt.

    OMP_NUM_THREADS=1 python scripts/first_step.py [--model smollm2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2", help="what the page opens on (SPECSCOPE_MODEL)")
    args = ap.parse_args()
    os.environ["SPECSCOPE_MODEL"] = args.model
    t0 = time.perf_counter()
    from ui.models import default_model, preload
    from ui.preview import default_config
    from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS
    from ui.run import Run
    preload()
    print(f"start-up loads ({default_model()}): {time.perf_counter() - t0:.1f} s")
    for method, knobs in (("talon", TALON_KNOBS), ("specbound", SPECBOUND_KNOBS)):
        t = time.perf_counter()
        run = Run.start(default_config(method, knobs))
        trace = run.step()
        first = time.perf_counter() - t
        t = time.perf_counter()
        run.step()
        print(f"{method}: first Step {first * 1000:.0f} ms (τ = {trace.tau}), second Step "
              f"{(time.perf_counter() - t) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
