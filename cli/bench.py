"""Benchmark: every method on the same prompts, measured side by side in one run.

    python -m cli.bench --prompts assets/prompts/heldout.jsonl --methods ar,chain,static,talon \
        --limit 12 --sweep-N 8,16,32,60,96 --sweep-mu 0.01,0.03,0.1,0.2,0.3 --peers

A method spec may name its drafter after an @ and carry knobs after colons: `talon@eagle3:N=60`,
`chain@lookup:gamma=8`, `specbound:alpha=0` (no @: --drafter). Runs are interleaved
prompt by prompt so machine noise hits every method alike. Speed-up is AR's wall time over the
method's on the same prompts; R = τ/(1 + c·δ) is the model's prediction from MAT, mean δ and
the measured cost ratio c of a draft forward to a one-token target forward, read off the cost curves
(core/auto/cost_model.py, 256 cached tokens) at the frontier widths the row drafted, averaged over its draft
forwards (SpecBound counts δ in target-forward equivalents, so its c is 1). "R, costs measured" prices each
step with what this machine measured instead (core/metrics.py costed_parts): a tree's verification at its size
off the cost curve, SpecBound's layers, checks and final head in layers. `specbound:preset=fast` names a
preset for one row. The compatibility readout (core/eagle3/readout.py) follows the tables: acceptance by draft
position, the head's layout, taps and draft vocabulary, and the share of the committed text its draft
vocabulary holds.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from cli.common import add_common_args, announce_drafters, fail, method_knobs, run_main
from cli.peers import run_peer
from core import knobs
from core.auto.budget import AutoMemory
from core.auto.cost_model import measure_costs
from core.drafter_registry import DrafterFactory, HeadLoadError, drafter_factory
from core.eagle3.readout import PositionTally, drafter_context, readout
from core.engine import Session
from core.methods import build_method
from core.lossless_check import first_difference, near_tie_eps
from core.metrics import Totals, costed_parts, speedup
from core.model.chat import ChatError, prepare_prompt, resolve_chat
from core.model.loading import DEFAULT_DRAFT, ModelLoadError, dtype_name, load_model, why_dtype
from core.prompts import read_prompts
from core.sampling import SamplingConfig
from core.server_flags import Measured, server_lines

STR_KNOBS = {k.name for k in knobs.ALL_KNOBS.values() if k.kind is str} | {"preset"}


@dataclass
class Row(Totals):
    """One table row: the run totals (core.metrics) and where the step time went."""
    label: str = ""
    build_ms: float = 0.0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    mismatches: int = 0  # prompts whose greedy output differs from AR (should stay 0 in fp32)
    near_ties: int = 0  # ... of them, those that part where the target's top-2 gap is within its dtype's rounding
    tally: PositionTally = field(default_factory=PositionTally)  # for the compatibility readout
    head: dict | None = None  # the EAGLE-3 head's HeadInfo, when the row drafts with one

    def compat(self) -> dict:
        """The readout as JSON columns."""
        r = readout(self.tally, self.head)
        return {"acceptance_by_position": r.acceptance, "reached_by_position": r.reached,
                "vocab_coverage": r.coverage, "head": r.head, "compat_warning": r.warning}


def parse_spec(spec: str, base: dict, drafter: str) -> tuple[str, str, str, dict]:
    """'talon@eagle3:mu=0.1:N=32' -> (label, method name, drafter key, knobs over the CLI's defaults). The drafter
    key carries the drafter's own knobs when it has any ('self:self_layer=3'), so each setting gets a factory."""
    head, *items = spec.split(":")
    name, _, named = head.partition("@")
    drafter = named or drafter
    kn = dict(base)
    for item in filter(None, items):
        key, _, value = item.partition("=")
        key = key.replace("-", "_")
        kn[key] = int(value) if value.lstrip("-").isdigit() else value if key in STR_KNOBS else float(value)
    options = knobs.drafter_options(drafter, kn)
    if not options.get(knobs.LOOKUP_MIX.name):  # off: the key (and the JSON's per-drafter fields) as without the knob
        options.pop(knobs.LOOKUP_MIX.name, None)
    return spec, name, ":".join([drafter] + [f"{k}={v}" for k, v in options.items()]), kn


def drafter_of(key: str) -> tuple[str, dict]:
    """A drafter key -> (drafter name, its knobs)."""
    name, *items = key.split(":")
    return name, {k: knobs.ALL_KNOBS[k].kind(v) for k, v in (item.split("=") for item in items)}


def run_specs(specs, rows: dict[str, Row], prompts, target, factories: dict[str, DrafterFactory], sampling,
              max_new, ar_out: dict, costs: dict) -> None:
    """Every spec on every prompt, interleaved prompt by prompt; costs: each drafter's cost curve (the costed R)."""
    for n, prompt in enumerate(prompts):
        for label, name, drafter, knobs in specs:
            method = build_method(name, **knobs)
            draft = factories[drafter]() if method.needs_draft else None
            res = Session(target, method, prompt, sampling, max_new, draft).generate()
            row = rows[label]
            row.add(res.traces, len(res.output_ids), res.wall_s)
            row.add_costed(costed_parts(res.traces, costs.get(drafter)))
            row.build_ms += sum(t.build_ms for t in res.traces)
            row.draft_ms += sum(t.draft_ms for t in res.traces)
            row.verify_ms += sum(t.verify_ms for t in res.traces)
            row.head, vocab = drafter_context(draft)
            row.tally.add(res.traces, vocab)
            if name == "ar":
                ar_out[n] = res.output_ids
            elif sampling.greedy and res.output_ids != ar_out.get(n):
                row.mismatches += 1
                at = first_difference(target, list(prompt), ar_out.get(n, []), res.output_ids)
                row.near_ties += int(at is not None and at[1] <= near_tie_eps(target))


def differs(r: Row) -> str:
    """The ≠AR cell: prompts whose output parted from AR, and how many of them at a near-tie (counted, not hidden)."""
    return f"{r.mismatches} ({r.near_ties} at near-ties)" if r.near_ties else str(r.mismatches)


def costed(r: Row) -> str:
    """The R column with measured costs: trees' ms off the cost curve, SpecBound's layers; – where neither."""
    return "–" if r.costed_r is None else f"{r.costed_r:.2f}"


def table(title: str, rows: list[Row], ar: Row, repeats: dict[str, list[float]] | None = None) -> str:
    """`repeats`: each row's tok/s in each repeat of the run (a column of its own when there are several)."""
    extra = " tok/s per repeat |" if repeats else ""
    head = ("| method | MAT | mean δ | tok/s | speed-up | modelled R | R, costs measured | c | build ms/step "
            f"| draft ms/step | verify ms/step | τ ≥ δ | Σp(u)/acc | ≠AR |{extra}\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
            + ("---|" if repeats else ""))
    lines = [f"### {title}", "", head]
    for r in rows:
        s = max(1, r.steps)
        per = f" {' / '.join(f'{x:.1f}' for x in repeats[r.label])} |" if repeats else ""
        lines.append(f"| {r.label} | {r.mat:.2f} | {r.mean_delta:.2f} | {r.tok_s:.1f} | {speedup(ar.wall_s, r.wall_s):.2f}× "
                     f"| {r.modelled_r:.2f} | {costed(r)} | {r.c:.3f} | {r.build_ms / s:.2f} | {r.draft_ms / s:.2f} "
                     f"| {r.verify_ms / s:.2f} | {r.oracle_share:.0%} | {r.calibration:.2f} | {differs(r)} |{per}")
    return "\n".join(lines)


def compat_table(rows: list[Row], positions: int = 4) -> str:
    """Acceptance by draft position (each share over the steps whose tree reached that position), the
    draft vocabulary's coverage of the committed text and the head, for every row that drafted."""
    cols = " | ".join(f"pos {d}" for d in range(positions))
    lines = ["### Compatibility readout (acceptance by draft position: of the steps whose tree reached it)", "",
             f"| method | steps | {cols} | draft-vocab coverage | head |", "|---|---|" + "---|" * (positions + 2)]
    warnings = []
    for r in rows:
        c = readout(r.tally, r.head)
        if not c.steps:
            continue
        accs = [f"{a:.0%} ({n})" for a, n in zip(c.acceptance, c.reached)][:positions]
        accs += ["–"] * (positions - len(accs))
        cov = f"{c.coverage:.1%}" if c.coverage is not None else "–"
        taps = ",".join(map(str, c.head["taps"])) if c.head else ""
        head = f"{c.head['dialect']}, taps {taps} ({c.head['tap_rule']})" if c.head else "–"
        lines.append(f"| {r.label} | {c.steps} | {' | '.join(accs)} | {cov} | {head} |")
        if c.warning:
            warnings.append(f"- {r.label}: {c.warning}")
    return "\n".join(lines + ([""] + warnings if warnings else []))


def peer_table(prompts, target, draft, max_new, exit_layers: list[int]) -> tuple[str, list[dict]]:
    """transformers' generate() peers, with our AR run again beside them prompt by prompt: their speed-ups
    are over that pass, so a machine that drifts between the methods' run and this one does not bias them. A
    peer that cannot run on this model (assisted decoding needs a draft sharing the target's tokenizer) or fails
    is one line saying why; the others are still measured."""
    labels = ["ar", "hf-greedy", "hf-assisted", "hf-prompt-lookup"] + [f"hf-early-exit@{k}" for k in exit_layers]
    skipped: dict[str, str] = {}
    if draft is None or len(draft.tokenizer) != len(target.tokenizer):
        skipped["hf-assisted"] = "no draft LM shares this target's tokenizer (pass --drafter model --draft FOLDER)"
    skipped.update({lab: f"the target has only {target.num_layers} layers" for lab in labels
                    if lab.startswith("hf-early-exit@") and int(lab.split("@")[1]) >= target.num_layers})
    walls = {lab: 0.0 for lab in labels}
    toks = {lab: 0 for lab in labels}
    for prompt in prompts:
        ids = list(prompt)  # prompt ids, chat template applied when the run uses it
        for lab in labels:
            if lab in skipped:
                continue
            try:
                if lab == "ar":
                    res = Session(target, build_method("ar"), prompt, SamplingConfig(), max_new).generate()
                    wall, out_ids = res.wall_s, res.output_ids
                else:
                    base, _, layer = lab.partition("@")
                    run = run_peer(base, target, draft, ids, max_new, exit_layer=int(layer or 4))
                    wall, out_ids = run.wall_s, run.output_ids
            except Exception as exc:  # noqa: BLE001 - a peer is another library: its failure is one line, not ours
                skipped[lab] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
                continue
            walls[lab] += wall
            toks[lab] += len(out_ids)
    lines = ["### transformers generate() peers (same prompts; our AR again, interleaved with them)", "",
             "| peer | tok/s | speed-up over our AR |", "|---|---|---|"]
    out = []
    for lab in labels:
        name = "ar (ours, this pass)" if lab == "ar" else lab
        if lab in skipped:
            lines.append(f"| {name} | — | not run: {skipped[lab]} |")
            out.append({"peer": name, "skipped": skipped[lab]})
            continue
        lines.append(f"| {name} | {toks[lab] / walls[lab]:.1f} | {speedup(walls['ar'], walls[lab]):.2f}× |")
        out.append({"peer": name, "tok_s": toks[lab] / walls[lab], "speedup": speedup(walls["ar"], walls[lab])})
    return "\n".join(lines), out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.error = fail  # one-line errors
    ap.add_argument("--methods", default="ar,chain,static,talon", help="comma-separated method specs")
    ap.add_argument("--limit", type=int, default=12, help="first N prompts of the file")
    ap.add_argument("--sweep-N", default="", help="budgets for static vs TALON, e.g. 8,16,32,60,96")
    ap.add_argument("--sweep-mu", default="", help="TALON gate ratios at the given N, e.g. 0.01,0.03,0.1,0.2")
    ap.add_argument("--sweep-drafter", default="model", help="the drafter the sweeps run on")
    ap.add_argument("--peers", action="store_true", help="also time transformers' generate() peers")
    ap.add_argument("--peer-exit-layers", default="2,4,6,8", help="LayerSkip-style peer: exit layers to try")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ap.add_argument("--points", default="", help="write the (δ, τ) points per step of every row to this JSON file")
    ap.add_argument("--fail-on-mismatch", action="store_true", help="exit with status 1 when a greedy row's "
                    "output differs from AR on any prompt (scripts/gpu_bench.sh)")
    ap.add_argument("--repeat", type=int, default=1, help="run every method over the prompts this many times, "
                    "the methods in reverse order on every other repeat (so a drifting machine favours none); "
                    "the table sums the repeats and shows each repeat's tok/s")
    ap.add_argument("--compile", action="store_true", help="run the target's layers through torch.compile "
                    "(core/model/compiled_layer.py), compiled before anything is timed")
    add_common_args(ap)
    args = ap.parse_args(argv)
    if args.repeat < 1:
        fail("--repeat must be at least 1")
    if args.points and not Path(args.points).expanduser().resolve().parent.is_dir():
        fail(f"--points {args.points}: its folder does not exist")
    sampling = SamplingConfig(args.temperature, args.top_p, args.seed)
    base = {**method_knobs(args), "record_raw": 0, "auto_memory": AutoMemory()}  # SpecBound: no trace-only
    # softmax while timing; auto: each prompt's session carries on where the last one on its setup rested
    try:
        sampling.validate()
        specs = [parse_spec(s, base, args.drafter) for s in args.methods.split(",")]
        if not any(name == "ar" for _, name, _, _ in specs):
            specs.insert(0, parse_spec("ar", base, args.drafter))
        sweeps = []
        at = "" if "@" in args.sweep_drafter else f"@{args.sweep_drafter}"
        for n in filter(None, args.sweep_N.split(",")):
            sweeps += [parse_spec(f"static{at}:N={n}", base, args.drafter),
                       parse_spec(f"talon{at}:N={n}", base, args.drafter)]
        for mu in filter(None, args.sweep_mu.split(",")):
            sweeps.append(parse_spec(f"talon{at}:mu={mu}", base, args.drafter))
        sweeps = [s for s in sweeps if s[0] not in {x[0] for x in specs}]
        for _, name, _, knobs in specs + sweeps:
            build_method(name, **knobs)  # validate every knob before measuring anything
        prompt_texts = [r["prompt"] for r in read_prompts(args.prompts)][: args.limit]
        target = load_model(args.model, args.device, args.dtype)
        if args.compile:
            print(f"compiled the target's layers in {target.compile_layers().compile_s:.1f} s", file=sys.stderr)
        chat = resolve_chat(args.chat, target.tokenizer)
        prompts = [prepare_prompt(target.tokenizer, p, args.chat).ids for p in prompt_texts]
        all_specs = specs + sweeps
        used = {d for _, name, d, knobs in all_specs if build_method(name, **knobs).needs_draft}
        factories = {d: drafter_factory(drafter_of(d)[0], target, args.draft if drafter_of(d)[0] == args.drafter
                                        else None, args.device, drafter_of(d)[1]) for d in used}
    except ChatError as exc:
        fail(f"--chat {args.chat}: {exc}")
    except (ValueError, ModelLoadError, HeadLoadError) as exc:
        fail(str(exc))
    announce_drafters(factories)
    print(f"precision: {why_dtype(target.dtype, target.device)}", file=sys.stderr)
    if target.device.type == "cpu":
        print(f"products on this CPU: {target.plan.describe()} (core/model/linear_kernels.py; SPECSCOPE_LINEAR)", file=sys.stderr)
    rows = {label: Row(label=label) for label, _, _, _ in all_specs}
    costs = {}
    for d, make in factories.items():  # first-call allocations and the cost curves (c, `auto`) out of the way
        Session(target, build_method("talon"), prompts[0], sampling, 8, make()).generate()
        costs[d] = measure_costs(target, make(), use_disk=False, progress=lambda m: print(m, file=sys.stderr))
    c = {d: cost.c for d, cost in costs.items()}
    ar_out: dict[int, list[int]] = {}
    repeats: dict[str, list[float]] = {label: [] for label in rows}
    for k in range(args.repeat):
        before = {label: (r.tokens, r.wall_s) for label, r in rows.items()}
        order = all_specs if k % 2 == 0 else [s for s in all_specs if s[1] == "ar"] + [
            s for s in reversed(all_specs) if s[1] != "ar"]  # AR first: the others compare their output to it
        run_specs(order, rows, prompts, target, factories, sampling, args.max_new_tokens, ar_out, costs)
        for label, r in rows.items():
            tokens, wall = r.tokens - before[label][0], r.wall_s - before[label][1]
            repeats[label].append(tokens / max(wall, 1e-9))
    for label, name, drafter, knobs in all_specs:  # c: the mean over the widths each row drafted
        needs = build_method(name, **knobs).needs_draft
        rows[label].c = costs[drafter].c_over(rows[label].widths) if needs else 1.0 if name == "specbound" else 0.0
    shown = repeats if args.repeat > 1 else None
    ar = rows[[s for s in specs if s[1] == "ar"][0][0]]
    out = {"machine": f"{torch.get_num_threads()} threads, torch {torch.__version__}", "prompts": len(prompts),
           "dtype": dtype_name(target.dtype),
           "max_new_tokens": args.max_new_tokens, "c": c, "chat": chat,
           "rows": [{**{k: v for k, v in asdict(r).items() if k not in ("points", "tally", "head")}, "chat": chat,
                     "mat": r.mat, "mean_delta": r.mean_delta,
                     "tok_s": r.tok_s, "speedup": speedup(ar.wall_s, r.wall_s), "modelled_r": r.modelled_r,
                     "costed_r": r.costed_r,
                     "oracle_share": r.oracle_share, "calibration": r.calibration, "tok_s_per_repeat": repeats[r.label],
                     **r.compat()} for r in rows.values()]}
    reps = f", {args.repeat} repeats" if args.repeat > 1 else ""
    reps += ", chat template" if chat else ""
    reps += f", {dtype_name(target.dtype)}"
    texts = [table(f"Methods ({len(prompts)} prompts, {args.max_new_tokens} new tokens{reps})",
                   [rows[s[0]] for s in specs], ar, shown)]
    if sweeps:
        texts.append(table("Sweeps", [ar] + [rows[s[0]] for s in sweeps], ar, shown))
    texts.append(compat_table(list(rows.values())))
    out["server_flags"] = server_lines([Measured(label, name, d, kn, speedup(ar.wall_s, rows[label].wall_s),
                                                 rows[label].mismatches == 0) for label, name, d, kn in all_specs],
                                       {args.drafter: args.draft} if args.draft else {})
    if out["server_flags"]:
        texts.append("\n".join(out["server_flags"]))
    if args.points:
        with open(args.points, "w") as fh:
            json.dump({r.label: r.points for r in rows.values()}, fh)
    if not args.json:  # what is measured is printed before the peers run: a peer cannot lose it
        print("\n\n".join(texts), flush=True)
    if args.peers:
        try:
            draft_lm = load_model(args.draft if args.drafter == "model" and args.draft else DEFAULT_DRAFT, args.device,
                                  args.dtype)
        except ModelLoadError:
            draft_lm = None
        text, out["peers"] = peer_table(prompts, target, draft_lm, args.max_new_tokens,
                                        [int(k) for k in args.peer_exit_layers.split(",") if k])
        print(text if not args.json else "", end="\n" if not args.json else "", flush=True)
    if args.json:
        print(json.dumps(out, indent=2))
    differ = [r.label for r in rows.values() if r.mismatches > r.near_ties]  # near-ties: the dtype's rounding
    if args.fail_on_mismatch and differ:
        fail(f"output differs from AR: {', '.join(differ)}", status=1)


if __name__ == "__main__":
    run_main(main)
