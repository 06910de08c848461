"""What a visitor waits for on the model the page opens on, as `python app.py` starts: the start-up loads
(`preload`), the start-up preview that page loads wait for (each view's step 1, `ui.preview.Preview.compute`; it
also pays first-call costs such as SpecBound's check timing), auto's cost curves measured after it, and then a
visitor's first and second Step of each view at the page's default knobs and example prompt.

    OMP_NUM_THREADS=1 python scripts/first_step.py [--model smollm2] [--no-preview]

--no-preview times the Steps straight after the loads, as a visitor would wait if the preview were gone.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2", help="what the page opens on (SPECSCOPE_MODEL)")
    ap.add_argument("--no-preview", action="store_true", help="skip the start-up preview and the cost curves")
    args = ap.parse_args()
    os.environ["SPECSCOPE_MODEL"] = args.model
    t0 = time.perf_counter()
    from ui.models import default_model, preload
    from ui.preview import default_config
    from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS
    from ui.run import Run
    preload()
    print(f"start-up loads ({default_model()}): {time.perf_counter() - t0:.1f} s")
    if not args.no_preview:
        from ui.preview import PREVIEW
        t = time.perf_counter()
        worker = threading.Thread(target=PREVIEW.compute)
        worker.start()
        PREVIEW.ready.wait()
        ready = time.perf_counter() - t
        worker.join()
        print(f"start-up preview (page loads wait for it): {ready:.1f} s; then auto's cost curves: "
              f"{time.perf_counter() - t - ready:.1f} s{' (' + PREVIEW.error + ')' if PREVIEW.error else ''}")
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
