"""External peers measured on the same models and prompts: transformers' own generate() with
assisted decoding, prompt-lookup decoding and LayerSkip-style early-exit self-drafting."""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from core.model.causal_lm import CausalLM


@dataclass
class PeerRun:
    label: str
    output_ids: list[int]
    wall_s: float


PEERS = ("hf-greedy", "hf-assisted", "hf-prompt-lookup", "hf-early-exit")


@torch.inference_mode()
def run_peer(label: str, target: CausalLM, draft: CausalLM | None, prompt_ids: list[int], max_new_tokens: int,
             exit_layer: int = 4) -> PeerRun:
    """Greedy transformers.generate() with one speculative flavour; returns generated ids only."""
    kwargs: dict = {}
    if label == "hf-assisted":
        kwargs["assistant_model"] = draft.hf
        kwargs["num_assistant_tokens"] = 5
    elif label == "hf-prompt-lookup":
        kwargs["prompt_lookup_num_tokens"] = 5
    elif label == "hf-early-exit":
        kwargs["assistant_early_exit"] = exit_layer
    elif label != "hf-greedy":
        raise ValueError(f"unknown peer '{label}' (choose from {', '.join(PEERS)})")
    ids = torch.tensor([prompt_ids], device=target.device)
    eos = sorted(target.eos_ids)
    t0 = time.perf_counter()
    out = target.hf.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
        eos_token_id=eos, pad_token_id=eos[0], **kwargs,
    )
    wall = time.perf_counter() - t0
    return PeerRun(f"{label}@{exit_layer}" if label == "hf-early-exit" else label, out[0, len(prompt_ids):].tolist(), wall)
