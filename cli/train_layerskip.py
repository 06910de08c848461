"""LayerSkip-style continued training of a target, so that its own shallow layers learn to predict
(SpecBound's self-drafting needs them to; the plain target's were never supervised).

    python -m cli.train_layerskip --model assets/models/target --out .cache/layerskip/target --steps 1000

Two terms on top of the next-token loss (Elhoushi et al., LayerSkip, continual-pretraining setting):
- layer dropout rising with depth: layer ℓ of L is skipped for a batch with probability
  p_max · (2^(ℓ/(L−1)) − 1), 0 at the first layer and p_max at the last, so later layers learn not to be
  relied on and earlier ones to carry the prediction;
- an early-exit loss through the model's own final norm and (tied) LM head: at step t the layers
  ℓ < L−1 with (ℓ − t) mod ROTATION = 0 (a rotating curriculum: every layer gets the loss every
  ROTATION steps, at a fraction of the cost of all of them every step) add ε · Σ w_ℓ CE_ℓ / Σ w_ℓ with
  w_ℓ = ℓ + 1 (deeper exits weigh more).
At the end it prints, on held-out tokens of the same corpus, the final layer's cross-entropy and each
layer's logit-lens top-1 agreement with the final layer, for the starting model and the trained one, and
writes them beside the exported model (`layerskip.json`). The exit heads SpecBound uses are trained
afterwards on the new model (`python -m cli.train_exit_heads --model OUT --stdlib`).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import AutoModelForCausalLM, LlamaForCausalLM, PreTrainedTokenizerFast

from cli.common import run_main
from cli.train_utils import autocast, batch, corpus, set_lr
from core.model.device import pick_device

ROTATION = 4  # layers get the early-exit loss every so many steps, in turn


def drop_probs(L: int, p_max: float) -> list[float]:
    """Per-layer skip probability, rising exponentially with depth from 0 to p_max."""
    return [p_max * (2 ** (i / (L - 1)) - 1) for i in range(L)]


def exit_layers_of_step(step: int, L: int) -> list[int]:
    """The layers below the last whose early-exit loss counts at this step (the rotating curriculum)."""
    return [i for i in range(L - 1) if (i - step) % ROTATION == 0]


def run_with_exits(model: LlamaForCausalLM, x: torch.Tensor, keep: list[bool], exits: list[int]):
    """(final logits (B, T, V), {ℓ: logits read through the final norm and LM head after layer ℓ}); layers
    with keep[ℓ] False are skipped (their input passes through)."""
    m = model.model
    h = m.embed_tokens(x)  # (B, T, H)
    pos = torch.arange(x.shape[1], device=x.device)[None].expand(x.shape[0], -1)
    pe = m.rotary_emb(h, pos)
    early = {}
    for i, layer in enumerate(m.layers):
        if keep[i]:
            h = layer(h, attention_mask=None, position_ids=pos, position_embeddings=pe)  # causal (sdpa)
        if i in exits:
            early[i] = model.lm_head(m.norm(h))
    return model.lm_head(m.norm(h)), early


@torch.no_grad()
def lens_metrics(model: LlamaForCausalLM, data: np.ndarray, tokens: int, seq_len: int) -> dict:
    """Held-out CE of the final layer and each layer's logit-lens top-1 agreement with the final layer."""
    model.eval()
    L = model.config.num_hidden_layers
    nll, agree, n = 0.0, [0] * L, 0
    for s in range(0, min(len(data) - seq_len - 1, tokens), seq_len):
        xy = torch.from_numpy(data[s: s + seq_len + 1].astype(np.int64))[None]
        final, early = run_with_exits(model, xy[:, :-1], [True] * L, list(range(L - 1)))
        top = final.argmax(-1)
        nll += float(F.cross_entropy(final[0].float(), xy[0, 1:], reduction="sum"))
        for i, lg in early.items():
            agree[i] += int((lg.argmax(-1) == top).sum())
        agree[L - 1] += top.numel()
        n += top.numel()
    model.train()
    return {"heldout_tokens": n, "final_ce": nll / n, "lens_agreement": [a / n for a in agree]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="assets/models/target", help="the target to continue from")
    ap.add_argument("--out", required=True, help="folder for the trained model (Hugging Face layout, fp16)")
    ap.add_argument("--work", default=".cache/layerskip")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--p-max", type=float, default=0.2, help="layer dropout at the last layer")
    ap.add_argument("--exit-weight", type=float, default=0.5, help="ε: weight of the early-exit loss")
    ap.add_argument("--eval-tokens", type=int, default=32768)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)
    work, out = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    device = pick_device(args.device)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(args.model)
    train, heldout = corpus(tokenizer, work)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to(device)
    L = model.config.num_hidden_layers
    before = lens_metrics(model, heldout, args.eval_tokens, args.seq_len)
    print("before:", json.dumps(before))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    ckpt, start, elapsed, legs = work / "layerskip.ckpt", 0, 0.0, []
    if ckpt.exists():
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start, elapsed, legs = state["step"], state["elapsed_s"], state.get("legs", [])
        print(f"resuming at step {start}")
    if start < args.steps:  # each (re)start with its own cosine, for the model card
        legs.append({"start": start, "steps": args.steps, "lr": args.lr, "p_max": args.p_max,
                     "exit_weight": args.exit_weight})
    probs = drop_probs(L, args.p_max)
    model.train()
    t0 = time.time()
    bar = tqdm(range(start, args.steps), desc="layerskip", initial=start, total=args.steps)
    for step in bar:
        set_lr(opt, step, args.steps, args.lr)
        xy = batch(train, args.seed, step, args.batch_size, args.seq_len).to(device)  # (B, T + 1)
        x, y = xy[:, :-1], xy[:, 1:]
        rng = np.random.default_rng([args.seed, step, 1])
        keep = [bool(rng.random() >= p) for p in probs]
        exits = exit_layers_of_step(step, L)
        with autocast(device):
            final, early = run_with_exits(model, x, keep, exits)
            ce = F.cross_entropy(final.float().flatten(0, 1), y.flatten())
            loss = ce
            if early:
                w = {i: i + 1.0 for i in early}
                exit_ce = sum(w[i] * F.cross_entropy(lg.float().flatten(0, 1), y.flatten()) for i, lg in early.items())
                loss = ce + args.exit_weight * exit_ce / sum(w.values())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        bar.set_postfix(loss=f"{loss.item():.3f}", ce=f"{ce.item():.3f}")
        if (step + 1) % 50 == 0 or step + 1 == args.steps:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1,
                        "elapsed_s": elapsed + time.time() - t0, "legs": legs}, ckpt)
    after = lens_metrics(model, heldout, args.eval_tokens, args.seq_len)
    model.to(torch.float16).save_pretrained(out, safe_serialization=True)  # fp16, as the embedded models ship
    tokenizer.save_pretrained(out)  # the starting model's, with its start-token rule
    report = {"before": before, "after": after, "train_s": elapsed + time.time() - t0, "legs": legs,
              "args": vars(args)}
    (out / "layerskip.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "args"}, indent=2))


if __name__ == "__main__":
    run_main(main)
