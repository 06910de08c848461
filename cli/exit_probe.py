"""Why SpecBound is as fast as it is on a model: what each layer's exit knows, what a check costs, what
the verification computes. Measured, on the target's own greedy continuations (what drafting meets).

    python -m cli.exit_probe [--model PATH] [--prompts FILE] [--n 40] [--max-new-tokens 64] [--alpha 0.5]
        [--tau 0.1,0.3,0.5,0.7,0.9] [--heads paper,shared,lens] [--runs paper,fast] [--run-prompts 12]

1. Per layer and head kind: top-1 agreement with the final layer, mean raw and annealed confidence
   (max softmax(z/T_ℓ), T_ℓ = 1 + α(1 − ℓ/L)), and at each τ the share of positions that would exit and how
   many of those agree (its precision). A confidence far below the agreement means exits come too rarely.
2. Costs on this machine: one decoder layer over one token, one check of each head kind, one AR step.
3. SpecBound runs (presets or knob settings `preset=fast:alpha=0`): per step the layers drafted (of them, the
   token-layers run for earlier tokens carried along, `layers_joined`), verified, checks made, and where the
   milliseconds went.
"""
from __future__ import annotations

import argparse
import time

import torch

from cli.common import OneLineParser, fail, run_main
from core.auto.cost_model import median_ms
from core.engine import Session
from core.model.causal_lm import CausalLM
from core.model.exit_heads import HEAD_KINDS, heads_for
from core.model.loading import DEFAULT_TARGET, ModelLoadError, load_model
from core.prompts import ASSET_PROMPTS, read_prompts
from core.specbound.annealing import act_temperature, check_cost
from core.specbound.method import build_specbound_method


@torch.no_grad()
def continuation_states(lm: CausalLM, prompts: list[str], max_new: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """States after each layer 1..L−1 at the positions that predict the target's greedy continuation tokens,
    each (n, d), and those tokens (n,) (the final layer's choices there)."""
    states: list[list[torch.Tensor]] = [[] for _ in range(lm.num_layers)]
    final = []
    for p in prompts:
        ids = lm.tokenizer(p)["input_ids"]
        out = lm.hf.generate(torch.tensor([ids], device=lm.device), max_new_tokens=max_new, do_sample=False)
        o = lm.hf(input_ids=out, output_hidden_states=True)
        first = len(ids) - 1  # the position that predicts the first generated token
        for layer in range(1, lm.num_layers):
            states[layer].append(o.hidden_states[layer][0, first:-1])
        final.append(o.logits[0, first:-1].argmax(-1))
    return [torch.cat(s) if s else torch.empty(0) for s in states], torch.cat(final)


@torch.no_grad()
def calibration_rows(lm: CausalLM, heads, states, final, alpha: float, taus: list[float]) -> list[str]:
    rows = []
    for layer in range(1, lm.num_layers):
        z = heads.logits(lm, layer, states[layer].to(lm.dtype))  # (n, V)
        raw, top = torch.softmax(z, -1).max(-1)
        annealed = torch.softmax(z / act_temperature(layer, lm.num_layers, alpha), -1).max(-1).values
        ok = (top == final).float()
        cells = []
        for conf in (raw, annealed):
            for tau in taus:
                gate = conf >= tau
                cells.append(f"{gate.float().mean():.2f} / {ok[gate].mean():.2f}" if gate.any() else "0.00 / –")
        rows.append(f"| {layer} | {ok.mean():.3f} | {raw.mean():.3f} | {annealed.mean():.3f} | " + " | ".join(cells) + " |")
    return rows


@torch.inference_mode()
def cost_rows(lm: CausalLM, kinds: list[str]) -> list[str]:
    """Each cost timed where decoding meets it: after a pass through every layer (core/specbound/annealing.check_cost)."""
    cache = lm.new_cache(300)
    lm.forward(list(range(1, 257)), list(range(256)), cache)

    def ar() -> None:
        cache.rollback(256)
        lm.forward([7], [256], cache)
    ar_ms = median_ms(ar, 30)
    base = check_cost(lm, heads_for(lm, "lens"))
    rows = [f"| one decoder layer, one token (a full pass / L) | {base.layer_ms:.3f} | 1.00 |",
            f"| the model's own final norm + LM head over {lm.vocab_size} tokens (the logit lens) | {base.check_ms:.3f} | "
            f"{base.layers:.2f} |"]
    for kind in kinds:
        heads = heads_for(lm, kind)
        cost = check_cost(lm, heads)
        rows.append(f"| a check through `{kind}` ({heads.kind}) | {cost.check_ms:.3f} | {cost.layers:.2f} |")
    rows.append(f"| one AR step (L = {lm.num_layers} layers + head) | {ar_ms:.3f} | {ar_ms / base.layer_ms:.2f} |")
    return rows


def run_rows(lm: CausalLM, settings: list[str], prompts: list[str], max_new: int) -> list[str]:
    rows = []
    for spec in settings:
        given = dict(item.split("=", 1) for item in spec.split(":")) if "=" in spec else {"preset": spec}
        given = {k: (v if k in ("preset", "exit_layers", "exit_heads") else float(v)) for k, v in given.items()}
        method = build_specbound_method(record_raw=False, **given)
        traces, t0 = [], time.perf_counter()
        for p in prompts:
            traces += Session(lm, method, p, max_new_tokens=max_new).generate().traces
        wall = time.perf_counter() - t0
        n, sb = len(traces), [t.specbound for t in traces]
        tokens = sum(t.tau for t in traces)
        rows.append(f"| {spec} | {tokens / n:.2f} | {sum(s.layers_draft for s in sb) / n:.2f} | "
                    f"{sum(s.layers_verify for s in sb) / n:.2f} | {sum(s.layers_joined for s in sb) / n:.2f} | "
                    f"{sum(s.head_evals for s in sb) / n:.2f} | {sum(t.draft_ms for t in traces) / n:.2f} | "
                    f"{sum(t.verify_ms for t in traces) / n:.2f} | {tokens / wall:.1f} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_TARGET)
    ap.add_argument("--prompts", default=str(ASSET_PROMPTS))
    ap.add_argument("--n", type=int, default=40, help="prompts whose continuations are probed")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--tau", default="0.1,0.3,0.5,0.7,0.9")
    ap.add_argument("--heads", default=",".join(HEAD_KINDS))
    ap.add_argument("--runs", default="paper,fast", help="SpecBound settings to run: presets or k=v:k=v")
    ap.add_argument("--run-prompts", type=int, default=12)
    args = ap.parse_args(argv)
    try:
        lm = load_model(args.model)
        prompts = [r["prompt"] for r in read_prompts(args.prompts)]
        kinds = [k for k in args.heads.split(",") if k]
        taus = [float(t) for t in args.tau.split(",") if t]
        for k in kinds:
            heads_for(lm, k)
    except (ValueError, ModelLoadError) as exc:
        fail(str(exc))
    states, final = continuation_states(lm, prompts[: args.n], args.max_new_tokens)
    print(f"## Exits on the target's own greedy continuations ({len(final)} positions of {args.n} prompts; "
          f"α = {args.alpha:g}; each cell: share that would exit / of those, share that agree)\n")
    cols = " | ".join(f"raw ≥ {t:g}" for t in taus) + " | " + " | ".join(f"annealed ≥ {t:g}" for t in taus)
    for kind in kinds:
        heads = heads_for(lm, kind)
        print(f"### heads: {kind} ({heads.kind})\n")
        print(f"| ℓ | agreement | raw confidence | annealed confidence | {cols} |")
        print("|---|---|---|---|" + "---|" * (2 * len(taus)))
        print("\n".join(calibration_rows(lm, heads, states, final, args.alpha, taus)) + "\n")
    print("## What a check costs here (median ms; in decoder layers over one token)\n")
    print("| what | ms | layers |\n|---|---|---|")
    print("\n".join(cost_rows(lm, kinds)) + "\n")
    runs = [r for r in args.runs.split(",") if r]
    if runs:
        print(f"## SpecBound per step ({args.run_prompts} prompts, {args.max_new_tokens} new tokens)\n")
        print("| setting | MAT | layers drafted | layers verified | token-layers carried along | checks | draft ms | verify ms | "
              "tok/s |\n|---|---|---|---|---|---|---|---|---|")
        print("\n".join(run_rows(lm, runs, prompts[: args.run_prompts], args.max_new_tokens)))


if __name__ == "__main__":
    run_main(main)
