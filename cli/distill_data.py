"""The target's own answers to training requests: the data heads for a chat model are distilled from.

    python -m cli.distill_data --model smollm2 --prompts assets/prompts/train_chat.jsonl --out .cache/distill/smollm2/responses.jsonl

EAGLE trains its heads on what the target itself writes (self-distillation), so a head learns the target's
style, not a data set's. Each request is wrapped in the target's chat template (as decoding does), answered
greedily, and written as one JSON line of token ids {"id", "prompt_ids", "response_ids"}. Requests are answered
in batches of similar length (left-padded) in bf16 where the CPU has bf16 matrix units (an answer only needs to
be the target's style, not bit-exact). Resumable: ids already in --out are skipped; `--shard i/n` splits the
work between processes.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from cli.common import fail, run_main
from core.model.real_models import resolve


def chat_ids(tok, prompt: str) -> list[int]:
    out = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True,
                                  return_dict=True)
    return list(out["input_ids"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--prompts", default="assets/prompts/train_chat.jsonl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--batch-size", type=int, default=24)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    ap.add_argument("--shard", default="0/1", help="i/n: answer every n-th request from the i-th")
    ap.add_argument("--ids", default="", help="only requests (with --as-text: answers) whose id starts with this")
    ap.add_argument("--as-text", nargs="+", default=None, metavar="ANSWERS",
                    help="instead: write these answer files to --out as plain text (each conversation as the chat "
                         "template lays it out), for cli.train_layer_heads --text")
    args = ap.parse_args(argv)
    i, n = (int(x) for x in args.shard.split("/"))
    folder = resolve(args.model)
    if not Path(folder).is_dir():
        fail(f"no model folder '{folder}' (run: python -m cli.get_model {args.model})")
    tok = AutoTokenizer.from_pretrained(folder)
    if args.as_text:
        rows = [json.loads(line) for f in args.as_text for line in Path(f).read_text().splitlines() if line.strip()]
        rows = sorted((r for r in rows if r["id"].startswith(args.ids)), key=lambda r: r["id"])
        Path(args.out).write_text("\n".join(tok.decode(r["prompt_ids"] + r["response_ids"]) for r in rows))
        print(args.out)
        return
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.bfloat16 if args.dtype == "bf16" else torch.float32).eval()
    rows = [r for r in (json.loads(line) for line in Path(args.prompts).read_text().splitlines() if line.strip())
            if r["id"].startswith(args.ids)][i::n]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in out.read_text().splitlines()} if out.exists() else set()
    todo = sorted(((r["id"], chat_ids(tok, r["prompt"])) for r in rows if r["id"] not in done), key=lambda r: len(r[1]))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    t0, made = time.time(), 0
    bar = tqdm(range(0, len(todo), args.batch_size), desc="answers", unit="batch")
    for s in bar:
        group = todo[s: s + args.batch_size]
        width = max(len(ids) for _, ids in group)
        x = torch.tensor([[pad] * (width - len(ids)) + ids for _, ids in group])  # (B, width), left-padded
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, ids in group])
        with torch.inference_mode():
            y = model.generate(input_ids=x, attention_mask=mask, max_new_tokens=args.max_new_tokens, do_sample=False,
                               pad_token_id=pad, eos_token_id=tok.eos_token_id)[:, width:]  # (B, new)
        with out.open("a") as fh:
            for (rid, ids), row in zip(group, y.tolist()):
                resp = row[: row.index(tok.eos_token_id) + 1] if tok.eos_token_id in row else row
                made += len(resp)
                fh.write(json.dumps({"id": rid, "prompt_ids": ids, "response_ids": resp}) + "\n")
        bar.set_postfix(tok_s=f"{made / (time.time() - t0):.0f}")
    print(out)


if __name__ == "__main__":
    run_main(main)
