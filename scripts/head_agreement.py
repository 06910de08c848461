"""How often an EAGLE-3 head's first guess is the target's choice, per unrolled draft step, on conversations no head
was trained on: the held-out requests' greedy answers (cli.distill_data --prompts assets/prompts/real.jsonl, then
cli.eagle3_features), every conversation counted. The card's own agreement is over held-out *training-distribution*
requests; this one says how far that carries to requests unlike any template.

    python scripts/head_agreement.py --features .cache/distill/smollm2/features_real --head assets/models/smollm2/eagle3
    python scripts/head_agreement.py --heldout-only --features F1,F2,... --head OLD NEW   # the trainer's held-out set
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file, as the docstring shows

from cli.eagle3_batches import Features
from cli.train_eagle3 import evaluate_features, new_head
from core.eagle3.loading import load_head
from core.model.real_models import resolve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--features", required=True, help="features folders, comma-separated")
    ap.add_argument("--heldout-only", action="store_true", help="only the conversations training held out (by the "
                    "hash of their id): two heads compared on what neither trained on, as the trainer evaluates")
    ap.add_argument("--head", nargs="+", required=True, help="head folders (or a training leg's head.ckpt) to compare")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    target = AutoModelForCausalLM.from_pretrained(resolve(args.model), dtype=torch.float32).eval()
    feats = Features(*(Path(f) for f in args.features.split(",")))
    if not args.heldout_only:
        feats.heldout = np.concatenate([feats.train, feats.heldout])  # every conversation is held out here
    V, H, L = target.config.vocab_size, target.config.hidden_size, target.config.num_hidden_layers
    for folder in args.head:
        if folder.endswith(".ckpt"):  # a leg under way: its last checkpoint
            state = torch.load(folder, map_location="cpu")["head"]
            head = new_head(target, state["d2t"] + torch.arange(len(state["d2t"])), 512, feats.meta["taps"])
            head.load_state_dict(state)
        else:
            head = load_head(folder, H, V, torch.device("cpu"), torch.float32, L)
        ids = head.draft_ids()
        lm_draft = target.lm_head.weight[ids].detach()
        m = evaluate_features(head, feats, target.model.embed_tokens, lm_draft, args.steps, ids, 4)
        inside = np.isin(feats.answer_tokens(feats.heldout), ids.numpy()).mean()
        print(json.dumps({"head": folder, "tokens": m["heldout_tokens"], "draft_vocab": len(ids),
                          "answer_tokens_in_draft_vocab": round(float(inside), 3),
                          "agreement": [round(a, 3) for a in m["agreement"]]}))


if __name__ == "__main__":
    main()
