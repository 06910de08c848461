"""Train the embedded default models reproducibly: tokenizer -> target -> distilled draft -> model card.

    python -m cli.train_embedded --out assets/models --work .cache/train

(the defaults are the shipped recipe: ~62 min for the target, ~27 min for the draft on 2 CPU cores; the
shipped draft got its 2000 steps in two legs, 1000 + 1000: see assets/models/README.md)

    python -m cli.train_embedded --target-from FOLDER --out OUT --work WORK

distills a draft, by the same recipe, from a target trained elsewhere (e.g. continued by
cli/train_layerskip.py), which is copied to OUT/target whole (its exit heads and notes too).

Every stage checkpoints into --work and resumes from there when run again with the same
arguments. Batches are drawn from a generator seeded by (seed, step), so a resumed run sees
the same data as an uninterrupted one. CUDA is used when present; on CPU the matmuls run
under bf16 autocast (AVX-512-BF16 makes that ~1.5x faster than fp32 here).
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from cli.common import run_main
from cli.corpus import source_files, split
from cli.train_utils import autocast, batch, encode_texts, heldout_metrics, set_lr
from core.model.device import pick_device

EOT = "<|endoftext|>"
HISTORY: dict[str, list[dict]] = {}  # filled by run_training, written to metrics.json


def train_tokenizer(texts: list[str], vocab_size: int, out: Path) -> PreTrainedTokenizerFast:
    """Byte-level BPE on Python source (no unknown tokens, indentation runs merge into tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=True,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, bos_token=EOT, pad_token=EOT)
    fast.model_max_length = 1024
    fast.save_pretrained(out)
    return fast


def with_start_token(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """Make tokenizer(text) prepend <|endoftext|>: training saw it before every file, so prompts
    start where files start. (Training encodes with add_special_tokens=False.)"""
    from tokenizers import processors

    eot = tokenizer.convert_tokens_to_ids(EOT)
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{EOT} $A", pair=f"{EOT} $A {EOT} $B", special_tokens=[(EOT, eot)])
    return tokenizer


def model_config(tokenizer: PreTrainedTokenizerFast, layers: int, hidden: int, ffn: int, ctx: int) -> LlamaConfig:
    eot = tokenizer.convert_tokens_to_ids(EOT)
    return LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
        num_attention_heads=hidden // 64, num_key_value_heads=hidden // 64, max_position_embeddings=ctx,
        rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
        bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
    )


def run_training(
    name: str, model: LlamaForCausalLM, data: np.ndarray, args: argparse.Namespace, steps: int, peak_lr: float,
    teacher: LlamaForCausalLM | None = None,
) -> LlamaForCausalLM:
    """Causal-LM training (or distillation from `teacher`: KL to its softmax), checkpointed every 50 steps."""
    device = pick_device(args.device)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.1)
    ckpt = Path(args.work) / f"{name}.ckpt"
    log = Path(args.work) / f"{name}.log.jsonl"
    start, history = 0, []
    if ckpt.exists():
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start, history = state["step"], state.get("history", [])
        print(f"[{name}] resuming at step {start}")
    if start < steps or not history:
        # (start step, schedule length) of every (re)start: a run resumed with another --*-steps
        # follows a different cosine from there on, and the model card says so
        history.append({"start": start, "total_steps": steps, "batch_size": args.batch_size, "seq_len": args.seq_len,
                        "lr": peak_lr})
    HISTORY[name] = history
    torch.manual_seed(args.seed)
    model.train()
    bar = tqdm(range(start, steps), desc=name, initial=start, total=steps)
    t0 = time.time()
    for step in bar:
        set_lr(opt, step, steps, peak_lr)
        xy = batch(data, args.seed, step, args.batch_size, args.seq_len).to(device)
        x, y = xy[:, :-1], xy[:, 1:]  # (B, T)
        with autocast(device):
            logits = model(input_ids=x).logits.float()  # (B, T, V)
            ce = F.cross_entropy(logits.flatten(0, 1), y.flatten())
            loss = ce
            if teacher is not None:
                with torch.no_grad():
                    t_logits = teacher(input_ids=x).logits.float()
                kl = F.kl_div(F.log_softmax(logits, -1), F.log_softmax(t_logits, -1), log_target=True, reduction="batchmean")
                loss = kl / x.shape[1] + 0.1 * ce
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        bar.set_postfix(loss=f"{loss.item():.3f}", ce=f"{ce.item():.3f}")
        with log.open("a") as fh:
            fh.write(json.dumps({"step": step, "loss": loss.item(), "ce": ce.item(), "s": time.time() - t0}) + "\n")
        if (step + 1) % 50 == 0 or step + 1 == steps:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1, "history": history}, ckpt)
    model.eval()
    return model


def export(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, out: Path) -> None:
    """Hugging Face folder with fp16 safetensors (the adapter upcasts to fp32 on CPU)."""
    out.mkdir(parents=True, exist_ok=True)
    half = LlamaForCausalLM(model.config)
    half.load_state_dict(model.state_dict())
    half.to(torch.float16).save_pretrained(out, safe_serialization=True)
    with_start_token(tokenizer).save_pretrained(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="assets/models")
    ap.add_argument("--work", default=".cache/train")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--target-layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--draft-layers", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--target-steps", type=int, default=3400)
    ap.add_argument("--draft-steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--target-from", default=None, help="a trained target folder to distill the draft from "
                    "(its tokenizer too) instead of training one")
    args = ap.parse_args(argv)
    work, out = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}

    train_files, heldout_files = split(source_files())
    train_texts = [f.read() for f in train_files]
    tok_dir = work / "tokenizer"
    t = time.time()
    if args.target_from is not None:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(args.target_from)
    elif (tok_dir / "tokenizer.json").exists():
        tokenizer = PreTrainedTokenizerFast.from_pretrained(tok_dir)
    else:
        tokenizer = train_tokenizer(train_texts, args.vocab_size, tok_dir)
    data_path = work / "train_ids.npy"
    if not data_path.exists():
        np.save(data_path, encode_texts(tokenizer, train_texts))
    data = np.load(data_path)
    timings["tokenizer_and_encode_s"] = time.time() - t
    print(f"corpus: {len(train_files)} train files, {len(data):,} tokens; {len(heldout_files)} held-out files")

    torch.manual_seed(args.seed)
    cfg = model_config(tokenizer, args.target_layers, args.hidden, args.ffn, args.ctx)
    t = time.time()
    if args.target_from is not None:
        target = LlamaForCausalLM.from_pretrained(args.target_from, dtype=torch.float32).to(pick_device(args.device))
    else:
        target = run_training("target", LlamaForCausalLM(cfg), data, args, args.target_steps, args.lr)
    timings["target_s"] = time.time() - t

    torch.manual_seed(args.seed + 1)
    draft = LlamaForCausalLM(model_config(tokenizer, args.draft_layers, args.hidden, args.ffn, args.ctx))
    # Start from the target's (tied) embedding so the draft speaks the same token geometry.
    draft.model.embed_tokens.weight.data.copy_(target.model.embed_tokens.weight.data)
    for p in target.parameters():
        p.requires_grad_(False)
    t = time.time()
    draft = run_training("draft", draft, data, args, args.draft_steps, args.lr, teacher=target)
    timings["draft_s"] = time.time() - t

    if args.target_from is not None:
        shutil.copytree(args.target_from, out / "target", dirs_exist_ok=True)
    else:
        export(target, tokenizer, out / "target")
    export(draft, tokenizer, out / "draft")
    metrics = heldout_metrics(out / "target", out / "draft", heldout_files, tokenizer)
    metrics.update(
        timings=timings, args=vars(args), train_tokens=int(len(data)), train_files=len(train_files),
        heldout_files=[f.relpath for f in heldout_files], schedule_history=HISTORY,
    )
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    print(json.dumps({k: v for k, v in metrics.items() if k != "heldout_files"}, indent=2))


if __name__ == "__main__":
    run_main(main)
