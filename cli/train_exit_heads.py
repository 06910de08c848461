"""Train SpecBound's exit heads for any supported model: distil the final layer into every layer ℓ < L.

    python -m cli.train_exit_heads --model PATH_OR_HUB_ID --text FILE [--out DIR] [--steps 300] [--seed 0]
    python -m cli.train_exit_heads --model assets/models/target --stdlib --card assets/models/README.md

The base model stays frozen; each head (see core/model/exit_heads.py) learns KL(p_L || q_ℓ) on random
windows of the text, where p_L is the model's own next-token distribution. The last 10% of a
--text file (or, with --stdlib, the held-out files of cli/corpus.py) is held out to report each
layer's top-1 agreement with the final layer, beside the untrained logit lens for reference.
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
from core.model.exit_heads import ExitHeads, fingerprint, heads_dir, save_heads, save_token_order

CARD_START = "## Exit heads (SpecBound)"  # cli/model_card.py keeps the card from "## Exit heads" on
CARD_END = "<!-- end of the exit-heads section, written by cli/train_exit_heads.py -->"


@dataclass
class TrainConfig:
    steps: int = 300
    batch: int = 4
    seq_len: int = 128
    rank: int = 64
    lr: float = 3e-3
    seed: int = 0
    eval_tokens: int = 8192


def distill_loss(lm: CausalLM, heads: ExitHeads, layer: int, h: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
    """KL(p_L || q_ℓ) per token, averaged."""
    log_q = torch.log_softmax(lm.head(heads.adapt(layer, h.to(lm.dtype))), -1)  # (B, T, V)
    return F.kl_div(log_q, log_p, log_target=True, reduction="none").sum(-1).mean()


def train_heads(lm: CausalLM, train_ids: list[int], cfg: TrainConfig, progress: bool = True) -> TrainResult:
    torch.manual_seed(cfg.seed)
    lm.hf.requires_grad_(False)
    heads = ExitHeads(lm.num_layers, lm.config.hidden_size, cfg.rank).to(lm.device)

    def layer_losses(states, log_p):
        return lambda layer: distill_loss(lm, heads, layer, states[layer - 1], log_p)
    return fit_per_layer(lm, heads, train_ids, cfg, layer_losses, "exit heads", postfix="kl", progress=progress)


@torch.no_grad()
def agreement(lm: CausalLM, heads: ExitHeads, ids: list[int], eval_tokens: int, chunk: int = 512) -> dict:
    """Per layer ℓ: top-1 agreement of the head and of the logit lens with the final layer on `ids`."""
    ids = ids[:eval_tokens]
    agree = {"head": [0] * (lm.num_layers - 1), "lens": [0] * (lm.num_layers - 1)}
    n = 0
    for s in range(0, len(ids), chunk):
        x = torch.tensor([ids[s: s + chunk]])  # (1, T)
        states, log_p = teacher(lm, x)
        final = log_p.argmax(-1)  # (1, T)
        for layer in range(1, lm.num_layers):
            h = states[layer - 1].to(lm.dtype)
            agree["head"][layer - 1] += int((lm.head(heads.adapt(layer, h)).argmax(-1) == final).sum())
            agree["lens"][layer - 1] += int((lm.head(h).argmax(-1) == final).sum())
        n += x.shape[1]
    return {"tokens": n, "head": [a / n for a in agree["head"]], "logit_lens": [a / n for a in agree["lens"]]}


def card_section(command: str, data: str, cfg: TrainConfig, res: TrainResult, metrics: dict, mb: float) -> str:
    rows = "\n".join(f"| {ell} | {lens:.3f} | {head:.3f} |" for ell, (lens, head)
                     in enumerate(zip(metrics["logit_lens"], metrics["head"]), start=1))
    return f"""{CARD_START}

Trained with `{command}`
on {data}: base frozen, one residual adapter per layer ℓ = 1..L−1 (RMSNorm + rank-{cfg.rank} down/up,
zero-initialised up projection) feeding the model's own final norm and tied LM head, distilled from the
final layer by KL(p_L ‖ q_ℓ); {cfg.steps} steps of {cfg.batch}×{cfg.seq_len} tokens, AdamW lr {cfg.lr},
{res.seconds / 60:.1f} min on CPU. Stored as `exit_heads.safetensors` (fp16, {mb:.2f} MB) + `exit_heads.json`, and
`exit_vocab.safetensors`: the training text's tokens by frequency (SpecBound's `--exit-vocab` checks only the
most frequent ones).

Top-1 agreement with the final layer on {metrics['tokens']} held-out tokens (final KL {res.losses[-1]:.3f}):

| layer ℓ | logit lens | trained head |
|---|---|---|
{rows}
{CARD_END}
"""


def main(argv: list[str] | None = None) -> None:
    ap = head_training_parser(__doc__, TrainConfig)
    ap.add_argument("--token-order-only", action="store_true",
                    help="only write exit_vocab.safetensors (the training text's tokens by frequency, for "
                         "SpecBound's --exit-vocab) next to the heads, without training")
    args = ap.parse_args(argv)
    cfg = TrainConfig(**{k: getattr(args, k) for k in asdict(TrainConfig())})
    lm, train_ids, held_ids, data_desc = load_training_data(args, cfg.seq_len, cfg.seed)
    out = args.out or heads_dir(args.model)
    save_token_order(train_ids, lm.config.vocab_size, out)
    if args.token_order_only:
        print(json.dumps({"out": str(out / "exit_vocab.safetensors"), "train_tokens": len(train_ids)}))
        return
    res = train_heads(lm, train_ids, cfg)
    metrics = agreement(lm, res.heads, held_ids, cfg.eval_tokens)
    meta = {"model": args.model, "base_fingerprint": fingerprint(lm), "data": data_desc, "config": asdict(cfg),
            "final_kl": res.losses[-1], "train_seconds": res.seconds, "heldout": metrics}
    save_heads(res.heads, out, meta)
    mb = (out / "exit_heads.safetensors").stat().st_size / 1e6
    print(json.dumps({"out": str(out), "megabytes": round(mb, 3), **metrics}))
    if args.card is not None:
        command = "python -m cli.train_exit_heads " + " ".join(sys.argv[1:] if argv is None else argv)
        write_card(args.card, card_section(command, data_desc, cfg, res, metrics, mb), CARD_START, CARD_END)


if __name__ == "__main__":
    run_main(main)
