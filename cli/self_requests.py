"""Requests the target writes itself: a chat model, given its template up to where a user's words begin, samples
what its users ask (Magpie's pre-query trick, Xu et al. 2024).

    python -m cli.self_requests --model smollm2 --n 1600 --out assets/prompts/train_self.jsonl

Why: an instruction-tuned model has seen far more users' requests than any templates we write, and asked to go
on from "<user turn opens>" it writes requests in their shapes and topics. A head trained on the model's answers
to them sees the kinds of conversations its users bring, which templated requests miss (the head's agreement on
hand-written requests trailed its agreement on held-out templated ones: assets/models/smollm2/README.md).
Sampled at temperature 1 from a fixed seed, in batches; kept only when the model closed its turn, within
--min-chars..--max-chars, not a repeat, and not equal to a held-out request of --heldout. Written as
{"id": "self-i", "prompt"} lines for `cli.distill_data --prompts`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from cli.common import fail, run_main
from core.model.real_models import resolve

SENTINEL = "\x00request\x00"


def pre_query(tok) -> str:
    """The chat template rendered up to where a user's message starts (system turn included)."""
    text = tok.apply_chat_template([{"role": "user", "content": SENTINEL}], tokenize=False, add_generation_prompt=False)
    return text[: text.index(SENTINEL)]


def keep(text: str, closed: bool, lo: int, hi: int) -> bool:
    """A request worth answering: its turn was closed by the model and its length is a request's."""
    return closed and lo <= len(text) <= hi and "<|" not in text


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--n", type=int, default=1600, help="requests to keep")
    ap.add_argument("--out", default="assets/prompts/train_self.jsonl")
    ap.add_argument("--heldout", default="assets/prompts/real.jsonl")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--min-chars", type=int, default=16)
    ap.add_argument("--max-chars", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    folder = resolve(args.model)
    if not Path(folder).is_dir():
        fail(f"no model folder '{folder}' (run: python -m cli.get_model {args.model})")
    tok = AutoTokenizer.from_pretrained(folder)
    end = tok.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tok.get_vocab() else tok.eos_token_id
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).eval()
    prefix = torch.tensor([tok(pre_query(tok), add_special_tokens=False).input_ids])  # (1, P)
    held = {json.loads(line)["prompt"].strip() for line in Path(args.heldout).read_text().splitlines() if line.strip()}
    torch.manual_seed(args.seed)
    kept: list[str] = []
    seen = set(held)
    bar = tqdm(total=args.n, desc="requests", unit="req")
    while len(kept) < args.n:
        x = prefix.repeat(args.batch_size, 1)  # (B, P)
        with torch.inference_mode():
            y = model.generate(input_ids=x, attention_mask=torch.ones_like(x), do_sample=True, temperature=1.0,
                               top_p=1.0, top_k=0, max_new_tokens=args.max_new_tokens, eos_token_id=end,
                               pad_token_id=end)[:, prefix.shape[1]:]  # (B, new)
        for row in y.tolist():
            closed = end in row
            text = tok.decode(row[: row.index(end)] if closed else row).strip()
            if keep(text, closed, args.min_chars, args.max_chars) and text not in seen and len(kept) < args.n:
                seen.add(text)
                kept.append(text)
                bar.update(1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps({"id": f"self-{i}", "prompt": p}) + "\n" for i, p in enumerate(kept)))
    print(out)


if __name__ == "__main__":
    run_main(main)
