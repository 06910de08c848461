"""Train SpecBound's per-layer exit heads the paper's way: a light LM head of its own for every layer ℓ < L,
on the frozen model, over the V_h most frequent tokens of the training text (core/model/layer_heads.py).

    python -m cli.train_layer_heads --model PATH_OR_HUB_ID --text FILE [--out DIR] [--steps 1500]
    python -m cli.train_layer_heads --model assets/models/target --stdlib --card assets/models/README.md

Each head starts as the logit lens restricted to its V_h rows and learns, on random windows of the text,
KL(p̃_L ‖ q_ℓ) + λ·CE(y_L, q_ℓ): p̃_L the final layer's distribution renormalised over the V_h rows, y_L the
final layer's own choice (positions where it falls outside the rows only count in the KL). The
cross-entropy is what makes a head's max-probability the chance that it agrees with the target, which is
what an exit test reads; the KL keeps q a distribution worth sampling from. The held-out part (the last 10%
of a --text file, or the held-out files of cli/corpus.py) reports each layer's agreement with the final
layer and its mean confidence, before (the logit lens) and after.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from cli.common import run_main
from cli.exit_data import TrainResult, fit_per_layer, head_training_parser, load_training_data, teacher
from cli.train_utils import write_card
from core.model.causal_lm import CausalLM
from core.model.exit_heads import fingerprint, heads_dir, save_token_order, token_order
from core.model.layer_heads import LayerHeads, save_layer_heads

CARD_START = "## Per-layer exit heads (SpecBound, the paper's kind)"
CARD_END = "<!-- end of the per-layer exit-heads section, written by cli/train_layer_heads.py -->"


@dataclass
class TrainConfig:
    steps: int = 1500
    batch: int = 4
    seq_len: int = 256
    vocab: int = 1024  # V_h: rows of each head, the most frequent tokens of the training text
    hard_weight: float = 3.0  # λ on the cross-entropy to the final layer's choice
    lr: float = 1e-3
    seed: int = 0
    eval_tokens: int = 16384


def layer_loss(heads: LayerHeads, layer: int, h: torch.Tensor, p_rows: torch.Tensor, y: torch.Tensor,
               hard_weight: float) -> torch.Tensor:
    """h (B, T, d); p_rows (B, T, V_h) the final distribution over the rows, renormalised; y (B, T) the final
    choice's row, −1 outside the rows. KL(p̃ ‖ q) + λ·CE(y)."""
    z = heads.small_logits(layer, h.reshape(-1, h.shape[-1]))  # (B·T, V_h)
    log_q = torch.log_softmax(z, -1)
    p = p_rows.reshape(-1, p_rows.shape[-1])
    kl = (p * (torch.log(p.clamp_min(1e-12)) - log_q)).sum(-1).mean()
    ce = F.nll_loss(log_q, y.reshape(-1), ignore_index=-1) if bool((y >= 0).any()) else z.sum() * 0
    return kl + hard_weight * ce


def targets(log_p: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From the final log-distribution (B, T, V): p̃ over the rows (B, T, V_h) and the choice's row (B, T)."""
    p_rows = torch.softmax(log_p[..., rows], -1)
    where = torch.full((log_p.shape[-1],), -1, dtype=torch.long, device=log_p.device)
    where[rows] = torch.arange(len(rows), device=log_p.device)
    return p_rows, where[log_p.argmax(-1)]


def train_heads(lm: CausalLM, train_ids: list[int], cfg: TrainConfig, progress: bool = True) -> TrainResult:
    torch.manual_seed(cfg.seed)
    lm.hf.requires_grad_(False)
    rows = token_order(train_ids, lm.vocab_size)[: cfg.vocab]  # the heads' rows, most frequent first
    heads = LayerHeads.logit_lens(lm, rows).to(lm.device)

    def layer_losses(states, log_p):
        p_rows, y = targets(log_p, heads.ids)  # once per batch, for every layer
        return lambda layer: layer_loss(heads, layer, states[layer - 1], p_rows, y, cfg.hard_weight)
    return fit_per_layer(lm, heads, train_ids, cfg, layer_losses, "layer heads", progress=progress)


@torch.no_grad()
def evaluate(lm: CausalLM, heads: LayerHeads, ids: list[int], eval_tokens: int, chunk: int = 512) -> dict:
    """Per layer ℓ: top-1 agreement with the final layer and mean max-probability (confidence), of the heads
    and of the logit lens (the shared final norm + LM head over the whole vocabulary)."""
    ids = ids[:eval_tokens]
    L = lm.num_layers
    sums = {k: [0.0] * (L - 1) for k in ("head", "lens", "head_conf", "lens_conf")}
    n = 0
    for s in range(0, len(ids), chunk):
        x = torch.tensor([ids[s: s + chunk]])  # (1, T)
        states, log_p = teacher(lm, x)
        final = log_p.argmax(-1)[0]  # (T,)
        for layer in range(1, L):
            h = states[layer - 1][0]  # (T, d)
            q = torch.softmax(heads.small_logits(layer, h), -1)  # (T, V_h)
            conf, top = q.max(-1)
            sums["head"][layer - 1] += float((heads.ids[top] == final).sum())
            sums["head_conf"][layer - 1] += float(conf.sum())
            lens = torch.softmax(lm.head(h.to(lm.dtype)), -1)  # (T, V)
            sums["lens"][layer - 1] += float((lens.argmax(-1) == final).sum())
            sums["lens_conf"][layer - 1] += float(lens.max(-1).values.sum())
        n += x.shape[1]
    return {"tokens": n, **{k: [round(v / n, 4) for v in vals] for k, vals in sums.items()},
            "logit_lens": [round(v / n, 4) for v in sums["lens"]]}


def card_section(command: str, data: str, cfg: TrainConfig, res: TrainResult, m: dict, mb: float) -> str:
    rows = "\n".join(f"| {ell} | {m['lens'][ell - 1]:.3f} | {m['lens_conf'][ell - 1]:.3f} | {m['head'][ell - 1]:.3f} | "
                     f"{m['head_conf'][ell - 1]:.3f} |" for ell in range(1, len(m["head"]) + 1))
    return f"""{CARD_START}

Trained with `{command}`
on {data}: base frozen; for each layer ℓ = 1..L−1 its own RMSNorm and a linear head over the {cfg.vocab} most
frequent tokens of the training text (started as the logit lens restricted to them), trained on
KL(p̃_L ‖ q_ℓ) + {cfg.hard_weight:g}·CE(final layer's choice); {cfg.steps} steps of {cfg.batch}×{cfg.seq_len} tokens,
AdamW lr {cfg.lr:g} (the paper's 3e-5 moved a head by less than a point of agreement in 300 steps here: see
docs/bench/specbound.md, "SpecBound: why it was slow"), {res.seconds / 60:.1f} min on CPU. Stored as `layer_heads.safetensors`
(fp16, {mb:.2f} MB) + `layer_heads.json`; SpecBound's default heads (`--exit-heads paper`).

Top-1 agreement with the final layer and mean confidence (max-probability) on {m['tokens']} held-out tokens
(final loss {res.losses[-1]:.3f}): confidence that reads like agreement is what an exit test needs.

| layer ℓ | logit lens: agreement | logit lens: confidence | head: agreement | head: confidence |
|---|---|---|---|---|
{rows}
{CARD_END}
"""


def main(argv: list[str] | None = None) -> None:
    ap = head_training_parser(__doc__, TrainConfig)
    args = ap.parse_args(argv)
    cfg = TrainConfig(**{k: getattr(args, k) for k in asdict(TrainConfig())})
    lm, train_ids, held_ids, data_desc = load_training_data(args, cfg.seq_len, cfg.seed)
    out = args.out or heads_dir(args.model)
    save_token_order(train_ids, lm.config.vocab_size, out)
    res = train_heads(lm, train_ids, cfg)
    metrics = evaluate(lm, res.heads, held_ids, cfg.eval_tokens)
    meta = {"model": args.model, "base_fingerprint": fingerprint(lm), "data": data_desc, "config": asdict(cfg),
            "final_loss": res.losses[-1], "train_seconds": res.seconds, "eps": res.heads.eps, "heldout": metrics}
    save_layer_heads(res.heads, out, meta)
    mb = (out / "layer_heads.safetensors").stat().st_size / 1e6
    print(json.dumps({"out": str(out), "megabytes": round(mb, 3), **metrics}))
    if args.card is not None:
        command = "python -m cli.train_layer_heads " + " ".join(sys.argv[1:] if argv is None else argv)
        write_card(args.card, card_section(command, data_desc, cfg, res, metrics, mb), CARD_START, CARD_END)


if __name__ == "__main__":
    run_main(main)
