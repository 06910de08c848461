"""Train an EAGLE-3 draft head for the embedded target, reproducibly, on this machine.

    python -m cli.train_eagle3 --target assets/models/target --out assets/models/eagle3 --work .cache/eagle3

Features come from the frozen target over the same stdlib corpus and train / held-out split as the
embedded models (cli/corpus.py). Each batch runs the target once (hidden states entering layers 2, L//2,
L-3, or the ones `--feature-layers` names, and its logits), then unrolls the head for `--ttt` steps
("training-time test"): step 0 reads the target's fused state, step k reads the head's own state from
step k-1 at the same position, one token further on, attending to the step-0 entries of the context plus
its own earlier steps at that position — exactly what a node at depth k sees while drafting a tree. The
loss at step k is the soft cross-entropy to the target's distribution restricted to the draft vocabulary
plus `--hard-weight` times the cross-entropy to its greedy choice, weighted 0.8^k.

The draft vocabulary is the `--draft-vocab` most frequent target tokens of the training text; a token
outside it cannot be drafted (verification stays exact either way). Resumable from --work; the data
order depends only on seed and step. On a CPU it runs in fp32: bf16 autocast made this one-layer head's
masked attention and its backward several times slower (docs/app.md, "Measurements behind the code").
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from cli.eagle3_batches import Features, ttt_mask
from cli.eagle3_batches import unrolled as unrolled_features
from cli.common import run_main
from cli.train_utils import autocast, batch, corpus, set_lr, write_card
from core.eagle3.head import EagleConfig, EagleHead, feature_layers
from core.eagle3.loading import load_head, save_head
from core.model.device import native_bf16, pick_device
from core.model.real_models import resolve

STEP_WEIGHT = 0.8  # EAGLE-3's decay of the loss over unrolled steps
CARD_START = "## EAGLE-3 draft head"  # after the exit-heads section, which cli/model_card.py keeps
CARD_END = "<!-- end of the EAGLE-3 section, written by cli/train_eagle3.py -->"


def legs_note(m: dict) -> str:
    parts = []
    for g in m.get("legs", []):
        warm = ""
        if "init" in g:
            taps = f" --feature-layers {g['feature_layers']}" if g.get("feature_layers") else ""
            warm = f" (--init {g['init']}{taps}, on a schedule of its own)"
        parts.append(f"from step {g['start']}{warm} with --steps {g['steps']} --lr {g['lr']} --hard-weight {g['hard_weight']}")
    return "; ".join(parts)


def card_section(m: dict, mb: float) -> str:
    a = m["args"]
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in a.items() if k not in ("device", "card") and v is not None)
    steps = " | ".join(f"{x:.3f}" for x in m["agreement"])
    ce = " | ".join(f"{x:.3f}" for x in m["soft_ce"])
    cols = " | ".join(f"step {k + 1}" for k in range(len(m["agreement"])))
    vocab = next((g["draft_vocab"] for g in reversed(m.get("legs", [])) if "draft_vocab" in g), a["draft_vocab"])
    grown = " (the draft vocabulary the last leg widened by token id)" if vocab != a["draft_vocab"] else ""
    held = "conversations held out by a hash of their id" if a.get("features") else "held-out files"
    return f"""{CARD_START}

`eagle3/`: an EAGLE-3 head for the target in the published SafeAILab/EAGLE layout (`config.json` with
`draft_vocab_size`, `model.safetensors` with `fc`, `midlayer.*`, `norm`, `lm_head`, `d2t`, `t2d`; fp16,
{mb:.2f} MB). It reads the target's hidden states {m.get('taps_text', 'entering layers 2, L//2, L-3')}, runs one decoder layer of
width {m.get('hidden', 'd')} over [embedding, state], and scores {vocab:,} target tokens{grown}
({m['draft_vocab_coverage']:.1%} of the training answers' tokens). Trained by
`python -m cli.train_eagle3 {flags}` on {m.get('data_text', "the embedded target's training split")} ({m['train_tokens']:,} tokens,
{m['train_s'] / 60:.1f} min on 2 CPU cores shared with other work), {a['ttt']} unrolled draft steps per position
(training-time test, loss weights 0.8^k), soft cross-entropy to the target's distribution over the draft
vocabulary plus `--hard-weight` × cross-entropy to its greedy choice, warm-started as a logit lens of the high
feature. Legs (each resumed from the previous one's checkpoint): {legs_note(m)}.

Held-out ({m['heldout_tokens']:,} tokens of the {held}; step k = a token k-1 levels below the root,
its ancestors correct):

| | {cols} |
|---|{'---|' * len(m['agreement'])}
| top-1 agreement with the target's greedy choice | {steps} |
| soft cross-entropy to the target (nats) | {ce} |
{CARD_END}
"""


def taps_text(taps: tuple[int, ...], num_layers: int) -> str:
    """'entering layers 2, 4 and after the last layer (8)' for the card."""
    words = [f"after the last layer ({i})" if i == num_layers else f"entering layer {i}" for i in taps]
    return ", ".join(words[:-1]) + " and " + words[-1]


def new_head(target, draft_ids: torch.Tensor, ttt_ctx: int, taps: list[int] | None = None) -> EagleHead:
    """A head the size of the target's layers, warm-started so it begins as a logit lens of the
    high feature: lm_head and norm from the target's, fc picking the high block, zeroed output
    projections (the decoder layer starts as the identity on the state)."""
    tc = target.config
    vocab = tc.vocab_size
    cfg = EagleConfig(hidden_size=tc.hidden_size, num_attention_heads=tc.num_attention_heads,
                      num_key_value_heads=tc.num_key_value_heads, intermediate_size=tc.intermediate_size,
                      vocab_size=vocab, draft_vocab_size=len(draft_ids), rms_norm_eps=tc.rms_norm_eps,
                      rope_theta=getattr(tc, "rope_theta", 10000.0), max_position_embeddings=ttt_ctx,
                      eagle_aux_hidden_state_layer_ids=taps)
    head = EagleHead(cfg)
    H = tc.hidden_size
    with torch.no_grad():
        head.lm_head.weight.copy_(target.lm_head.weight[draft_ids])
        head.norm.weight.copy_(target.model.norm.weight)
        head.fc.weight.zero_()
        head.fc.weight[:, 2 * H:] = torch.eye(H)
        head.midlayer.self_attn.o_proj.weight.zero_()
        head.midlayer.mlp.down_proj.weight.zero_()
        if head.reduced:
            head.d2t.copy_(draft_ids - torch.arange(len(draft_ids)))
            head.t2d.zero_()
            head.t2d[draft_ids] = True
    return head


def warm_start(head: EagleHead, saved: EagleHead, folder: Path,
               draft_ids: torch.Tensor) -> tuple[int, float, list, int]:
    """Load `saved` (the head in `folder`) into `head`; (steps, seconds, legs, tokens) it was trained for, from its
    metrics.json, so the model card keeps the whole history. The draft vocabulary may have grown
    (`saved_vocabulary`): rows of lm_head are matched by token id, and a token new to it keeps `head`'s start (the
    target's own lm_head row)."""
    if saved.reduced != head.reduced:
        raise SystemExit(f"error: the head in '{folder}' has another kind of vocabulary; train from scratch instead")
    wanted = head.state_dict()
    state = {k: v.to(wanted[k].dtype) for k, v in saved.state_dict().items() if k in wanted}
    if head.reduced:
        old = saved.draft_ids().cpu()  # (Vd_old,) token ids
        row = torch.full((head.config.vocab_size,), -1, dtype=torch.long)
        row[old] = torch.arange(len(old))
        at = row[draft_ids.cpu()]  # (Vd,) the saved row of each draft token, -1 if new
        if (at < 0).all() or len(old) > len(draft_ids):
            raise SystemExit(f"error: the head in '{folder}' has another draft vocabulary; train from scratch instead")
        lm = wanted["lm_head.weight"].clone()  # (Vd, H)
        lm[at >= 0] = state["lm_head.weight"][at[at >= 0]]
        state.update({"lm_head.weight": lm, "d2t": wanted["d2t"], "t2d": wanted["t2d"]})
    head.load_state_dict(state)
    m = json.loads((folder / "metrics.json").read_text()) if (folder / "metrics.json").exists() else {}
    legs = m.get("legs", [])
    steps = max([g["steps"] for g in legs], default=0)
    return steps, float(m.get("train_s", 0.0)), legs, int(m.get("train_tokens", 0))


def saved_vocabulary(saved: EagleHead, counts: np.ndarray, size: int) -> torch.Tensor:
    """A warm start's draft vocabulary: the saved head's tokens, topped up with the most frequent others of
    this leg's data to at most `size` (sorted ids; a token the data never holds is not added), so a leg on wider
    data can widen what the head may draft."""
    if not saved.reduced:
        return draft_vocabulary(counts, size)[0]
    old = saved.draft_ids().cpu().numpy()
    rest = np.argsort(-counts, kind="stable")
    rest = rest[~np.isin(rest, old) & (counts[rest] > 0)][: max(0, size - len(old))]  # tokens it saw
    return torch.from_numpy(np.sort(np.concatenate([old, rest])))


def unrolled(head: EagleHead, target, x: torch.Tensor, steps: int, draft_ids: torch.Tensor):
    """x: (B, S) token ids. Yields, per unrolled step k, (head logits (B, T, Vd), teacher logits over the
    draft vocabulary (B, T, Vd), the target's full-vocabulary argmax (B, T)), with T = S - steps."""
    B, S = x.shape
    T = S - steps
    with torch.no_grad():
        out = target(input_ids=x, output_hidden_states=True)
        hs = out.hidden_states
        taps = feature_layers(len(hs) - 1, head.config.eagle_aux_hidden_state_layer_ids)
        feats = torch.cat([hs[i] for i in taps], -1)[:, :T]  # (B, T, 3H)
        t_logits = out.logits  # (B, S, V): row j predicts x_{j+1}
    emb_table = target.model.embed_tokens
    pos0 = torch.arange(T, device=x.device).expand(B, T)
    state = head.fc(feats)  # (B, T, H)
    keys, values = [], []
    for k in range(steps):
        emb = emb_table(x[:, 1 + k: 1 + k + T]).detach()  # token x_{t+1+k}
        q, kk, vv = head.qkv(emb, state, pos0 + k)
        keys.append(kk)
        values.append(vv)
        state = head.attend(state, q, torch.cat(keys, 2), torch.cat(values, 2), ttt_mask(T, k, x.device))
        teacher = t_logits[:, 1 + k: 1 + k + T]  # predicts x_{t+2+k}
        yield head.logits(state), teacher[..., draft_ids], teacher.argmax(-1)


def step_loss(head_logits: torch.Tensor, teacher_logits: torch.Tensor, scored: torch.Tensor | None = None) -> torch.Tensor:
    """Soft cross-entropy to the target's distribution over the draft vocabulary (over the scored positions)."""
    target_p = torch.softmax(teacher_logits.float(), -1)
    ce = -(target_p * F.log_softmax(head_logits.float(), -1)).sum(-1)
    return ce.mean() if scored is None else ce[scored].mean()


def hard_loss(head_logits: torch.Tensor, top: torch.Tensor, to_draft: torch.Tensor,
              scored: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy to the target's greedy choice (its draft id; choices outside the draft vocabulary are
    skipped). The target is uncertain (several nats of entropy), so soft targets alone move the argmax
    slowly; greedy verification accepts exactly when the argmaxes agree."""
    labels = to_draft[top]  # (B, T) draft ids, -1 outside
    if scored is not None:
        labels = labels.masked_fill(~scored, -1)
    return F.cross_entropy(head_logits.float().flatten(0, 1), labels.flatten(), ignore_index=-1)


@torch.no_grad()
def evaluate(head: EagleHead, target, data: np.ndarray, steps: int, draft_ids: torch.Tensor,
             tokens: int, seq_len: int) -> dict:
    """Held-out top-1 agreement with the target's greedy choice (full vocabulary) and soft CE, per step."""
    head.eval()
    agree = [0] * steps
    ce = [0.0] * steps
    n = 0
    for s in range(0, min(len(data) - seq_len - steps, tokens), seq_len):
        x = torch.from_numpy(data[s: s + seq_len + steps].astype(np.int64))[None]
        for k, (hl, tl, top) in enumerate(unrolled(head, target, x, steps, draft_ids)):
            agree[k] += int((draft_ids[hl.argmax(-1)] == top).sum())
            ce[k] += float(step_loss(hl, tl)) * top.numel()
        n += x.shape[1] - steps
    head.train()
    return {"heldout_tokens": n, "agreement": [a / n for a in agree], "soft_ce": [c / n for c in ce]}


@torch.no_grad()
def evaluate_features(head: EagleHead, feats: Features, emb_table, lm_draft: torch.Tensor, steps: int,
                      draft_ids: torch.Tensor, batch_size: int) -> dict:
    """The same per-step agreement and soft CE over the held-out answers' positions."""
    head.eval()
    agree, ce, n = [0] * steps, [0.0] * steps, 0
    for b in feats.heldout_batches(batch_size):
        for k, (hl, tl, top, sc) in enumerate(unrolled_features(head, emb_table, lm_draft, b, steps)):
            agree[k] += int(((draft_ids[hl.argmax(-1)] == top) & sc).sum())
            ce[k] += float(step_loss(hl, tl, sc)) * int(sc.sum())
            if k == 0:
                n += int(sc.sum())
    head.train()
    return {"heldout_tokens": n, "agreement": [a / n for a in agree], "soft_ce": [c / n for c in ce]}


def draft_vocabulary(counts: np.ndarray, size: int) -> tuple[torch.Tensor, float]:
    """The `size` most frequent target tokens (sorted ids) and the share of counted tokens they cover."""
    ids = np.sort(np.argsort(-counts, kind="stable")[:size])
    return torch.from_numpy(ids), float(counts[ids].sum() / counts.sum())


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="assets/models/target", help="a folder, or a real model's name (smollm2)")
    ap.add_argument("--out", default="assets/models/eagle3")
    ap.add_argument("--work", default=".cache/eagle3")
    ap.add_argument("--features", default=None, help="cli.eagle3_features folders, comma-separated: train on the "
                    "target's own answers (features computed once) instead of running the target over the stdlib "
                    "corpus")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--ttt", type=int, default=4, help="unrolled draft steps per position")
    ap.add_argument("--draft-vocab", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--hard-weight", type=float, default=1.0, help="weight of the CE to the target's greedy choice")
    ap.add_argument("--eval-tokens", type=int, default=32768)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--card", default=None, help="model card to write the metrics section into")
    ap.add_argument("--feature-layers", default=None, help="the three target hidden states fc fuses, e.g. 2,4,8 "
                    "(0 = embeddings, i = input of layer i, L = last layer's output); default: 2, L//2, L-3")
    ap.add_argument("--init", default=None, help="start from this head folder (published layout; e.g. the shipped "
                    "assets/models/eagle3) instead of a logit lens, when --work has no checkpoint")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    work, out = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    device = pick_device(args.device)
    target_dir = resolve(args.target)
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval().to(device)
    for p in target.parameters():
        p.requires_grad_(False)
    V, L = target.config.vocab_size, target.config.num_hidden_layers
    folders = [Path(p) for p in args.features.split(",")] if args.features else []
    feats = Features(*folders) if folders else None
    if feats is not None and not len(feats.heldout):
        raise SystemExit("error: --features holds no held-out conversation to evaluate the head on (add requests)")
    if feats is not None:
        counts = np.bincount(feats.answer_tokens(feats.train), minlength=V)
        taps = feats.meta["taps"]
        data_text = (f"the target's own greedy answers to {len(feats.train):,} chat and code requests "
                     f"(`{'`, `'.join(f.name for f in folders)}`: {int(counts.sum()):,} answer tokens)")
    else:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(target_dir)
        train, heldout = corpus(tokenizer, work)
        counts = np.bincount(train, minlength=V)
        data_text = "the embedded target's training split"
        taps = None
        if args.feature_layers is not None:
            try:
                taps = list(feature_layers(L, [int(i) for i in args.feature_layers.split(",")]))
            except ValueError as exc:
                raise SystemExit(f"error: --feature-layers: {exc}") from None
    draft_ids, coverage = draft_vocabulary(counts, args.draft_vocab)
    ckpt = work / "head.ckpt"
    if ckpt.exists():  # a resumed leg keeps the vocabulary it started with
        d2t = torch.load(ckpt, map_location="cpu")["head"].get("d2t")
        draft_ids = d2t + torch.arange(len(d2t)) if d2t is not None else draft_ids
    saved = None
    if args.init is not None and not ckpt.exists():  # a warm start: the saved head, loaded once
        saved = load_head(Path(args.init), target.config.hidden_size, V, torch.device("cpu"), torch.float32)
        draft_ids = saved_vocabulary(saved, counts, args.draft_vocab)
    coverage = float(counts[draft_ids.numpy()].sum() / counts.sum())
    draft_ids = draft_ids.to(device)
    print(f"{data_text}; draft vocabulary of {len(draft_ids)} covers {coverage:.1%}")

    to_draft = torch.full((V,), -1, dtype=torch.long, device=device)
    to_draft[draft_ids] = torch.arange(len(draft_ids), device=device)
    torch.manual_seed(args.seed)
    head = new_head(target, draft_ids.cpu(), args.seq_len, taps).to(device)
    emb_table = target.model.embed_tokens
    lm_draft = target.lm_head.weight[draft_ids].detach()  # (Vd, H): the teacher's rows
    opt = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=args.lr, betas=(0.9, 0.95),
                            weight_decay=0.0)
    log = work / "head.log.jsonl"
    start, elapsed, legs, seen_before = 0, 0.0, [], 0
    warm = saved is not None
    if warm:  # a warm start: its legs and time carry on, the optimiser does not
        start, elapsed, legs, seen_before = warm_start(head, saved, Path(args.init), draft_ids)
        print(f"starting from {args.init} (trained {start} steps)")
    if ckpt.exists():
        state = torch.load(ckpt, map_location=device)
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        start, elapsed, legs = state["step"], state.get("elapsed_s", 0.0), state.get("legs", [])
        seen_before = state.get("seen", 0)  # answer tokens the earlier legs trained on (older checkpoints: not kept)
        print(f"resuming at step {start}")
    if start < args.steps:  # every (re)start with its schedule and loss, for the model card
        leg = {"start": start, "steps": args.steps, "hard_weight": args.hard_weight, "lr": args.lr,
               "draft_vocab": len(draft_ids), "features": args.features}
        if warm:  # a warm start warms up and decays over its own steps
            leg.update(schedule_from=start, init=args.init, feature_layers=args.feature_layers)
        elif legs and legs[-1]["steps"] == args.steps and "schedule_from" in legs[-1]:  # the same leg, resumed
            leg["schedule_from"] = legs[-1]["schedule_from"]
        legs.append(leg)
    s0 = legs[-1].get("schedule_from", 0) if legs else 0
    head.train()
    # bf16 autocast where the device computes bf16 natively (CUDA, or a CPU with AVX512-BF16 / AMX)
    fast_bf16 = device.type == "cuda" or native_bf16()
    t0 = time.time()
    seen = seen_before
    bar = tqdm(range(start, args.steps), desc="eagle3", initial=start, total=args.steps)
    for step in bar:
        set_lr(opt, step - s0, args.steps - s0, args.lr)
        loss = torch.zeros((), device=device)
        if feats is not None:
            b = feats.sample(args.seed, step, args.batch_size)
            seen += int(b.scored.sum())
            with autocast(device) if fast_bf16 else contextlib.nullcontext():  # the head's products on the bf16 units
                for k, (hl, tl, top, sc) in enumerate(unrolled_features(head, emb_table, lm_draft, b, args.ttt)):
                    loss = loss + STEP_WEIGHT ** k * (step_loss(hl, tl, sc) + args.hard_weight * hard_loss(hl, top, to_draft, sc))
        else:
            x = batch(train, args.seed, step, args.batch_size, args.seq_len + args.ttt - 1).to(device)  # (B, S)
            seen += args.batch_size * args.seq_len
            with autocast(device) if device.type == "cuda" else contextlib.nullcontext():
                for k, (hl, tl, top) in enumerate(unrolled(head, target, x, args.ttt, draft_ids)):
                    loss = loss + STEP_WEIGHT ** k * (step_loss(hl, tl) + args.hard_weight * hard_loss(hl, top, to_draft))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        bar.set_postfix(loss=f"{loss.item():.3f}")
        with log.open("a") as fh:
            fh.write(json.dumps({"step": step, "loss": loss.item(), "s": elapsed + time.time() - t0}) + "\n")
        if (step + 1) % 50 == 0 or step + 1 == args.steps:
            torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "step": step + 1,
                        "elapsed_s": elapsed + time.time() - t0, "legs": legs, "seen": seen}, ckpt)
    train_s = elapsed + time.time() - t0
    if feats is not None:
        metrics = evaluate_features(head, feats, emb_table, lm_draft, args.ttt, draft_ids, args.batch_size)
    else:
        metrics = evaluate(head, target, heldout, args.ttt, draft_ids, args.eval_tokens, args.seq_len)
    used = feature_layers(L, taps)
    metrics.update(train_s=train_s, train_tokens=args.steps * args.batch_size * args.seq_len if feats is None else seen,
                   draft_vocab_coverage=coverage, args=vars(args), legs=legs, hidden=head.config.hidden_size,
                   data_text=data_text, taps_text=taps_text(used, L))
    save_head(head, out, metrics)
    if args.card is not None:
        mb = (out / "model.safetensors").stat().st_size / 1e6
        write_card(Path(args.card), card_section(metrics, mb), CARD_START, CARD_END)
    print(json.dumps({k: v for k, v in metrics.items() if k != "args"}, indent=2))


if __name__ == "__main__":
    run_main(main)
