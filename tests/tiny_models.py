"""Tiny random models of each supported family, built in memory (no downloads)."""
from __future__ import annotations

import torch
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, PreTrainedTokenizerFast,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

from core.model.causal_lm import CausalLM

COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, eos_token_id=1, bos_token_id=0)
FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM, {}),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, {}),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, {"head_dim": 16}),
    "mistral": (MistralConfig, MistralForCausalLM, {"sliding_window": 6}),
}


def char_tokenizer() -> PreTrainedTokenizerFast:
    """A 64-symbol word-level tokenizer so tiny models decode to readable text."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"<s>": 0, "</s>": 1}
    for i, ch in enumerate("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789()"[:62]):
        vocab[ch] = i + 2
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<s>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def tiny_hf(family: str, seed: int = 0, **overrides) -> torch.nn.Module:
    cfg_cls, model_cls, extra = FAMILIES[family]
    torch.manual_seed(seed)
    cfg = cfg_cls(**{**COMMON, **extra, **overrides})
    model = model_cls(cfg).eval()
    with torch.no_grad():  # larger weights than the default init make sharper, more varied distributions
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    return model


def tiny_lm(family: str = "llama", seed: int = 0, **overrides) -> CausalLM:
    return CausalLM(tiny_hf(family, seed, **overrides), char_tokenizer(), f"tiny-{family}-{seed}")
