"""What the frozen target gives an EAGLE-3 head to learn from, computed once per training leg, not per epoch.

    python -m cli.eagle3_features --model smollm2 --answers .cache/distill/smollm2/responses.*.jsonl --out .cache/distill/smollm2/features

For each (request, the target's own answer) of cli.distill_data, one forward of the target (fp32, or bf16 with --dtype) gives, per
position j: the three tapped hidden states fc fuses (inputs of layers 2, L//2, L-3 unless --feature-layers
says otherwise), the final normed state (the head's teacher logits over any draft vocabulary are
lm_head(final) restricted to it, so the vocabulary can be chosen later). The target's greedy choice after an
answer's position j is the answer's next token (the answers were decoded greedily), so the vocabulary-wide
LM head is not run here at all. Written as flat fp16 memory-mapped arrays with per-sequence offsets (a few GB for a few hundred
thousand tokens), so training reads batches without running the target again. About 5% of the requests,
chosen by a hash of their id, are held out for the head's evaluation.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm
from transformers import AutoModelForCausalLM

from cli.common import fail, run_main
from core.eagle3.head import feature_layers
from core.model.real_models import resolve

HELDOUT_MODULUS = 20


def heldout(rid: str) -> bool:
    return int.from_bytes(hashlib.sha1(rid.encode()).digest()[:4], "little") % HELDOUT_MODULUS == 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--answers", nargs="+", required=True, help="cli.distill_data outputs (globs allowed)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--feature-layers", default=None, help="three hidden-state indices, e.g. 2,15,27")
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--limit", type=int, default=0, help="at most this many conversations (a seeded sample)")
    ap.add_argument("--skip", nargs="*", default=[], help="features folders whose conversations to leave out "
                    "(a later leg adds only what earlier legs did not compute)")
    ap.add_argument("--ids", default="", help="only answers whose request id starts with this (e.g. wide-: a "
                    "leg's new data)")
    ap.add_argument("--batch-tokens", type=int, default=2048)
    ap.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"), help="the target's precision here: bf16 "
                    "is about twice as fast on CPUs with bf16 matrix units, and is what `--dtype auto` decodes in there")
    args = ap.parse_args(argv)
    folder = resolve(args.model)
    files = sorted({f for pattern in args.answers for f in glob.glob(pattern)})
    if not files:
        fail(f"no answers match {args.answers}")
    rows = [json.loads(line) for f in files for line in Path(f).read_text().splitlines() if line.strip()]
    skip = {i for f in args.skip for i in json.loads((Path(f) / "meta.json").read_text())["ids"]}
    rows = sorted((r for r in rows if r["id"].startswith(args.ids) and r["id"] not in skip), key=lambda r: r["id"])
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    L, H = model.config.num_hidden_layers, model.config.hidden_size
    ids = [int(i) for i in args.feature_layers.split(",")] if args.feature_layers else None
    taps = feature_layers(L, ids)
    seqs = [(r["id"], (r["prompt_ids"] + r["response_ids"])[: args.max_len], len(r["prompt_ids"])) for r in rows]
    seqs = [s for s in seqs if len(s[1]) > s[2] + 1]
    if 0 < args.limit < len(seqs):
        keep = sorted(np.random.default_rng(0).choice(len(seqs), args.limit, replace=False))
        seqs = [seqs[i] for i in keep]
    lengths = np.array([len(s[1]) for s in seqs])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n = int(offsets[-1])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    feats = np.lib.format.open_memmap(out / "feats.npy", "w+", np.float16, (n, 3 * H))
    final = np.lib.format.open_memmap(out / "final.npy", "w+", np.float16, (n, H))
    tokens = np.zeros(n, np.int32)
    greedy = np.zeros(n, np.int32)
    order = np.argsort(lengths)  # batches of similar length waste little padding
    groups, cur, width = [], [], 0
    for i in order:
        width = max(width, lengths[i])
        if cur and width * (len(cur) + 1) > args.batch_tokens:
            groups.append(cur)
            cur, width = [], lengths[i]
        cur.append(i)
    groups.append(cur)
    with torch.inference_mode():
        for g in tqdm(groups, desc="features", unit="batch"):
            S = int(lengths[g].max())
            x = torch.zeros(len(g), S, dtype=torch.long)
            for b, i in enumerate(g):
                x[b, : lengths[i]] = torch.tensor(seqs[i][1])
            o = model.model(input_ids=x, output_hidden_states=True)  # right padding: causal rows never see it
            tapped = torch.cat([o.hidden_states[t] for t in taps], -1)  # (B, S, 3H)
            fin = o.last_hidden_state  # (B, S, H): after the final norm, what lm_head reads
            top = torch.roll(x, -1, 1)  # (B, S): an answer is the target's own greedy choice, token by token
            for b, i in enumerate(g):
                a, m = int(offsets[i]), int(lengths[i])
                feats[a: a + m] = tapped[b, :m].half().numpy()
                final[a: a + m] = fin[b, :m].half().numpy()
                tokens[a: a + m] = x[b, :m].numpy()
                greedy[a: a + m] = top[b, :m].numpy()
    feats.flush()
    final.flush()
    np.save(out / "tokens.npy", tokens)
    np.save(out / "greedy.npy", greedy)
    meta = {"model": args.model, "taps": list(taps), "hidden": H, "layers": L, "tokens": n,
            "ids": [s[0] for s in seqs], "offsets": offsets.tolist(), "prompt_lens": [s[2] for s in seqs],
            "heldout": [heldout(s[0]) for s in seqs], "answers": files}
    (out / "meta.json").write_text(json.dumps(meta))
    print(f"{len(seqs)} sequences, {n:,} tokens ({sum(meta['heldout'])} sequences held out)")
    print(out)


if __name__ == "__main__":
    run_main(main)
