"""What a matrix product of the target's own shapes costs for 1..8 rows, against one row, on this machine.

    OMP_NUM_THREADS=1 python scripts/row_cost.py [--model assets/models/target] [--rows 1,2,3,4,8]

Speculative decoding pays when checking T tokens costs about what one does: a forward that streams its weights
from memory (a 7B model on a GPU). The embedded target's layers fit in a CPU's caches, so there a product is
bound by arithmetic and T rows cost up to T times one: this table says how much of a verification's extra
tokens is free here. Each cell is the median of 7 timings of 400 calls, all shapes timed side by side in one run.

The second table times what a forward does instead: every layer's products in turn, so the weights stream from
memory rather than sit in cache, through F.linear on the weight as loaded ((out, in) row-major), through
F.linear on the same weight stored column by column (only the strides differ: the engine's CPU layout until
2026-12-05), through a copy stored as (in, out) (`x @ Wt`), and through the two kernels core/model/linear_kernels.py
may choose instead of F.linear (W·xᵀ; oneDNN over a prepacked copy), in ms for all of them together.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from core.model.linear_kernels import NARROW, PACKED, Product, packed_available  # noqa: E402
from core.model.loading import DEFAULT_TARGET, load_model  # noqa: E402


def shapes(lm) -> list[tuple[str, torch.Tensor]]:
    """(what, weight (out, in)) for every distinct product of one decoder layer, then the LM head."""
    layer = lm.layers[0]
    attn, mlp = layer.self_attn, layer.mlp
    return [(what, w.contiguous()) for what, w in  # row-major, as loaded
            (("q/k/v/o projection", attn.q_proj.weight), ("MLP gate/up", mlp.gate_proj.weight),
             ("MLP down", mlp.down_proj.weight), ("LM head (whole vocabulary)", lm.hf.lm_head.weight))]


def cost_us(w: torch.Tensor, rows: int, calls: int = 400, repeats: int = 7) -> float:
    """Median µs of one F.linear of `rows` rows through w, after a warm-up."""
    x = torch.randn(rows, w.shape[1], dtype=w.dtype)  # (T, in)
    for _ in range(50):
        F.linear(x, w)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            F.linear(x, w)
        times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)


LAYOUTS = {"F.linear, W (out, in) row-major, as loaded": "rows",
           "F.linear, the same W stored column-major (`W.t().contiguous().t()`)": "columns",
           "x @ Wt, a copy stored (in, out)": "transposed",
           "narrow: W·xᵀ, W row-major (one row doubled)": NARROW}
if packed_available():
    LAYOUTS["packed: oneDNN over a copy of W reordered once"] = PACKED


def streamed_ms(lm, rows: int, layout: str, repeats: int = 15) -> float:
    """Median ms of every decoder layer's seven products for `rows` rows, layer after layer (weights streamed)."""
    ws = [m.weight for layer in lm.layers for m in (layer.self_attn.q_proj, layer.self_attn.k_proj,
          layer.self_attn.v_proj, layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)]
    ws = [w.t().contiguous().t() if layout == "columns" else w.contiguous() for w in ws]  # (out, in) either way
    xs = [torch.randn(rows, w.shape[1], dtype=w.dtype) for w in ws]  # (T, in) each
    if layout == "transposed":
        wts = [w.t().contiguous() for w in ws]  # (in, out)

        def run():
            for x, wt in zip(xs, wts):
                x @ wt
    elif layout in (NARROW, PACKED):
        products = [Product(w, None) for w in ws]
        for p in products if layout == PACKED else ():
            p.packed()

        def run():
            for x, p in zip(xs, products):
                p.run(layout, x)
    else:
        def run():
            for x, w in zip(xs, ws):
                F.linear(x, w)
    for _ in range(3):
        run()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=DEFAULT_TARGET)
    ap.add_argument("--rows", default="1,2,3,4,8", help="row counts to time, comma-separated (1 is the reference)")
    args = ap.parse_args(argv)
    rows = sorted({1, *(int(r) for r in args.rows.split(","))})
    lm = load_model(args.model)
    print(f"{lm.name}: torch {torch.__version__}, {torch.get_num_threads()} thread(s), {lm.dtype}")
    print("| product | weight | " + " | ".join(f"T = {r}" for r in rows) + " |")
    print("|---|---|" + "---|" * len(rows))
    with torch.inference_mode():
        for what, w in shapes(lm):
            us = [cost_us(w, r) for r in rows]
            cells = [f"{us[0]:.1f} µs"] + [f"{u / us[0]:.2f}×" for u in us[1:]]
            print(f"| {what} | {w.shape[0]}×{w.shape[1]} | " + " | ".join(cells) + " |")
        print(f"\n| all {lm.num_layers} layers' products, streamed | " + " | ".join(f"T = {r}" for r in rows) + " |")
        print("|---|" + "---|" * len(rows))
        for label, layout in LAYOUTS.items():
            print(f"| {label} | " + " | ".join(f"{streamed_ms(lm, r, layout):.2f} ms" for r in rows) + " |")


if __name__ == "__main__":
    main()
