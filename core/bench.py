"""Benchmark: every method on the same prompts, measured side by side in one run.

    python -m core.bench --prompts assets/prompts/heldout.jsonl --methods ar,chain,static,talon \
        --limit 12 --sweep-N 8,16,32,60,96 --sweep-mu 0.01,0.03,0.1,0.2,0.3 --peers

A method spec may carry knobs after colons: `talon:mu=0.1:N=32`, `specbound:alpha=0`. Runs are interleaved
prompt by prompt so machine noise hits every method alike. Speed-up is AR's wall time over the
method's on the same prompts; R = τ/(1 + c·δ) is the model's prediction from MAT, mean δ and
the measured cost ratio c of one draft forward to one target forward (SpecBound counts δ in
target-forward equivalents, so its c is 1).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field

import torch

from core.engine import Session
from core.generate import add_common_args, fail, method_knobs
from core.loading import ModelLoadError, load_model
from core.methods import build_method
from core.peers import run_peer
from core.prompts import read_prompts
from core.sampling import SamplingConfig


@dataclass
class Row:
    label: str
    tokens: int = 0
    steps: int = 0
    draft_forwards: int = 0
    wall_s: float = 0.0
    build_ms: float = 0.0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    c: float = 0.0
    mismatches: int = 0  # prompts whose greedy output differs from AR (should stay 0)
    points: list[tuple[int, int]] = field(default_factory=list)  # (δ, τ) per step

    @property
    def mat(self) -> float:
        return self.tokens / max(1, self.steps)

    @property
    def mean_delta(self) -> float:
        return self.draft_forwards / max(1, self.steps)

    @property
    def tok_s(self) -> float:
        return self.tokens / max(1e-9, self.wall_s)

    @property
    def oracle_share(self) -> float:
        """Share of steps on or above the Oracle line τ = δ (every draft forward paid for itself)."""
        return sum(tau >= delta for delta, tau in self.points) / max(1, len(self.points))

    @property
    def modelled_r(self) -> float:
        return self.mat / (1 + self.c * self.mean_delta) if self.steps else 0.0


def parse_spec(spec: str, base: dict) -> tuple[str, str, dict]:
    """'talon:mu=0.1:N=32' -> (label, method name, knobs over the CLI's defaults)."""
    name, *items = spec.split(":")
    knobs = dict(base)
    for item in filter(None, items):
        key, _, value = item.partition("=")
        key = key.replace("-", "_")
        knobs[key] = int(value) if value.lstrip("-").isdigit() else float(value)
    return spec, name, knobs


@torch.inference_mode()
def measure_c(target, draft, context: list[int], reps: int = 30) -> float:
    """Median time of a one-token draft forward over a one-token target forward, at this context."""
    def per_call(lm) -> float:
        cache = lm.new_cache()
        lm.forward(context, range(len(context)), cache)
        times = []
        for _ in range(reps):
            cache.rollback(len(context))
            t0 = time.perf_counter()
            lm.forward(context[-1:], [len(context)], cache)
            times.append(time.perf_counter() - t0)
        return sorted(times)[len(times) // 2]
    return per_call(draft) / per_call(target)


def run_specs(specs, rows: dict[str, Row], prompts, target, draft, sampling, max_new, ar_out: dict) -> None:
    for n, prompt in enumerate(prompts):
        for label, name, knobs in specs:
            method = build_method(name, **knobs)
            res = Session(target, method, prompt, sampling, max_new, draft).generate()
            row = rows[label]
            row.tokens += len(res.output_ids)
            row.steps += res.steps
            row.draft_forwards += res.draft_forwards
            row.wall_s += res.wall_s
            row.build_ms += sum(t.build_ms for t in res.traces)
            row.draft_ms += sum(t.draft_ms for t in res.traces)
            row.verify_ms += sum(t.verify_ms for t in res.traces)
            row.points += [(t.delta, t.tau) for t in res.traces]
            if name == "ar":
                ar_out[n] = res.output_ids
            elif sampling.greedy and res.output_ids != ar_out.get(n):
                row.mismatches += 1


def table(title: str, rows: list[Row], ar: Row) -> str:
    head = ("| method | MAT | mean δ | tok/s | speed-up | modelled R | c | build ms/step | draft ms/step "
            "| verify ms/step | τ ≥ δ | ≠AR |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"### {title}", "", head]
    for r in rows:
        s = max(1, r.steps)
        lines.append(f"| {r.label} | {r.mat:.2f} | {r.mean_delta:.2f} | {r.tok_s:.1f} | {ar.wall_s / r.wall_s:.2f}× "
                     f"| {r.modelled_r:.2f} | {r.c:.3f} | {r.build_ms / s:.2f} | {r.draft_ms / s:.2f} "
                     f"| {r.verify_ms / s:.2f} | {r.oracle_share:.0%} | {r.mismatches} |")
    return "\n".join(lines)


def peer_table(prompts, target, draft, max_new, ar: Row, exit_layers: list[int]) -> tuple[str, list[dict]]:
    labels = ["hf-greedy", "hf-assisted", "hf-prompt-lookup"] + [f"hf-early-exit@{k}" for k in exit_layers]
    walls = {lab: 0.0 for lab in labels}
    toks = {lab: 0 for lab in labels}
    for prompt in prompts:
        ids = target.tokenizer(prompt)["input_ids"]
        for lab in labels:
            base, _, layer = lab.partition("@")
            run = run_peer(base, target, draft, ids, max_new, exit_layer=int(layer or 4))
            walls[lab] += run.wall_s
            toks[lab] += len(run.output_ids)
    lines = ["### transformers generate() peers (same prompts, same run)", "",
             "| peer | tok/s | speed-up over our AR |", "|---|---|---|"]
    out = []
    for lab in labels:
        lines.append(f"| {lab} | {toks[lab] / walls[lab]:.1f} | {ar.wall_s / walls[lab]:.2f}× |")
        out.append({"peer": lab, "tok_s": toks[lab] / walls[lab], "speedup": ar.wall_s / walls[lab]})
    return "\n".join(lines), out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.error = fail  # one-line errors
    ap.add_argument("--methods", default="ar,chain,static,talon", help="comma-separated method specs")
    ap.add_argument("--limit", type=int, default=12, help="first N prompts of the file")
    ap.add_argument("--sweep-N", default="", help="budgets for static vs TALON, e.g. 8,16,32,60,96")
    ap.add_argument("--sweep-mu", default="", help="TALON gate ratios at the given N, e.g. 0.01,0.03,0.1,0.2")
    ap.add_argument("--peers", action="store_true", help="also time transformers' generate() peers")
    ap.add_argument("--exit-layers", default="2,4,6,8", help="LayerSkip-style peer: exit layers to try")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ap.add_argument("--points", default="", help="write the (δ, τ) points per step of every row to this JSON file")
    add_common_args(ap)
    args = ap.parse_args(argv)
    sampling = SamplingConfig(args.temperature, args.top_p, args.seed)
    base = method_knobs(args)
    try:
        sampling.validate()
        specs = [parse_spec(s, base) for s in args.methods.split(",")]
        if not any(name == "ar" for _, name, _ in specs):
            specs.insert(0, parse_spec("ar", base))
        sweeps = []
        for n in filter(None, args.sweep_N.split(",")):
            sweeps += [parse_spec(f"static:N={n}", base), parse_spec(f"talon:N={n}", base)]
        for mu in filter(None, args.sweep_mu.split(",")):
            sweeps.append(parse_spec(f"talon:mu={mu}", base))
        sweeps = [s for s in sweeps if s[0] not in {x[0] for x in specs}]
        for _, name, knobs in specs + sweeps:
            build_method(name, **knobs)  # validate every knob before measuring anything
        prompts = [r["prompt"] for r in read_prompts(args.prompts)][: args.limit]
        target = load_model(args.model, args.device)
        draft = load_model(args.draft, args.device)
    except (ValueError, ModelLoadError) as exc:
        fail(str(exc))
    all_specs = specs + sweeps
    rows = {label: Row(label) for label, _, _ in all_specs}
    warm = Session(target, build_method("talon"), prompts[0], sampling, 8, draft)
    warm.generate()  # first-call allocations out of the way
    context = target.tokenizer(prompts[0])["input_ids"]
    c_draft = measure_c(target, draft, context)
    for label, name, _ in all_specs:
        rows[label].c = 0.0 if name == "ar" else 1.0 if name == "specbound" else c_draft
    ar_out: dict[int, list[int]] = {}
    run_specs(all_specs, rows, prompts, target, draft, sampling, args.max_new_tokens, ar_out)
    ar = rows[[s for s in specs if s[1] == "ar"][0][0]]
    out = {"machine": f"{torch.get_num_threads()} threads, torch {torch.__version__}", "prompts": len(prompts),
           "max_new_tokens": args.max_new_tokens, "c_draft": c_draft,
           "rows": [{**{k: v for k, v in asdict(r).items() if k != "points"}, "mat": r.mat, "mean_delta": r.mean_delta,
                     "tok_s": r.tok_s, "speedup": ar.wall_s / r.wall_s, "modelled_r": r.modelled_r,
                     "oracle_share": r.oracle_share}
                    for r in rows.values()]}
    texts = [table(f"Methods ({len(prompts)} prompts, {args.max_new_tokens} new tokens)", [rows[s[0]] for s in specs], ar)]
    if sweeps:
        texts.append(table("Sweeps", [ar] + [rows[s[0]] for s in sweeps], ar))
    if args.peers:
        text, out["peers"] = peer_table(prompts, target, draft, args.max_new_tokens, ar,
                                        [int(k) for k in args.exit_layers.split(",") if k])
        texts.append(text)
    if args.points:
        with open(args.points, "w") as fh:
            json.dump({r.label: r.points for r in rows.values()}, fh)
    print(json.dumps(out, indent=2) if args.json else "\n\n".join(texts))


if __name__ == "__main__":
    main()
