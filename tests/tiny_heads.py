"""Tiny random EAGLE-3 heads written in the published layout (config.json + weights), for tiny targets."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from core.eagle3.head import EagleConfig, EagleHead
from core.model.causal_lm import CausalLM


def write_tiny_head(target: CausalLM, folder: Path, draft_vocab: int | None = None, kind: str = "safetensors",
                    seed: int = 0, taps: list[int] | None = None, nested: bool = False) -> Path:
    """A random head for `target` over `draft_vocab` target ids (None: the full vocabulary, no d2t/t2d),
    reading the target's hidden states `taps` (None: the published default), named at the config's top
    level (hidden-state indices) or, with `nested`, written as given inside an `eagle_config` block, where
    the loader reads them by SGLang's rule (+1 when the first id is 1)."""
    c = target.config
    vocab = target.vocab_size
    cfg = EagleConfig(hidden_size=c.hidden_size, num_attention_heads=c.num_attention_heads,
                      num_key_value_heads=c.num_key_value_heads, intermediate_size=c.intermediate_size,
                      vocab_size=vocab, draft_vocab_size=draft_vocab or vocab, eagle_aux_hidden_state_layer_ids=taps)
    torch.manual_seed(seed)
    head = EagleHead(cfg)
    with torch.no_grad():
        for p in head.parameters():
            if p.dim() == 2:
                p.mul_(4.0)  # sharper distributions, as for the tiny targets
        if head.reduced:
            ids = torch.randperm(vocab)[:draft_vocab].sort().values
            head.d2t.copy_(ids - torch.arange(draft_vocab))
            head.t2d.zero_()
            head.t2d[ids] = True
    folder.mkdir(parents=True, exist_ok=True)
    config = cfg.to_dict()
    if nested and taps is not None:
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": config.pop("eagle_aux_hidden_state_layer_ids")}
    (folder / "config.json").write_text(json.dumps(config))
    state = {k: v.contiguous() for k, v in head.state_dict().items()}
    if kind == "safetensors":
        save_file(state, folder / "model.safetensors")
    else:
        torch.save(state, folder / "pytorch_model.bin")
    return folder
