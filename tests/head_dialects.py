"""Tiny converters: write a head (a config dict and tensors in our names, as SafeAILab publishes them) into
each publisher's layout, as their exporters write it (read from their code: SafeAILab/EAGLE
eagle/model/cnets.py, SpecForge specforge/modeling/draft/llama3_eagle.py + configs/, vllm-project/speculators
src/speculators/convert/eagle/eagle3_converter.py + models/eagle3/config.py, NVIDIA Model-Optimizer
modelopt/torch/export/plugins/hf_spec_export.py, Tencent AngelSlim train/models/draft/llama_eagle3.py).

Each writer takes `taps`: None leaves the taps to the default, otherwise the hidden-state indices the head
reads, written in the numbering that publisher uses (top-level ids as given, `eagle_config` ids as layer
outputs, i.e. one less).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoConfig

GEOMETRY = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size",
            "rms_norm_eps", "rope_theta", "max_position_embeddings", "head_dim", "hidden_act")


def layers_names(state: dict) -> dict:
    """midlayer.* -> layers.0.*, extra_layers.j.* -> layers.{j+1}.* (speculators, ModelOpt, newer AngelSlim)."""
    out = {}
    for k, v in state.items():
        k = re.sub(r"^extra_layers\.(\d+)\.", lambda m: f"layers.{int(m.group(1)) + 1}.", k)
        out[k.replace("midlayer.", "layers.0.", 1) if k.startswith("midlayer.") else k] = v
    return out


def _write(folder: Path, config: dict, state: dict, bin_file: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    state = {k: v.contiguous() for k, v in state.items()}
    if bin_file:
        torch.save(state, folder / "pytorch_model.bin")
    else:
        save_file(state, folder / "model.safetensors")
    return folder


def _outputs(taps: list[int] | None) -> dict:
    return {} if taps is None else {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [i - 1 for i in taps]}}


def safeailab(folder: Path, config: dict, state: dict, embed: torch.Tensor | None = None, taps=None) -> Path:
    """pytorch_model.bin, `midlayer.*`, no embedding, rope_theta left out when it is Llama's default."""
    cfg = {k: v for k, v in config.items() if not (k == "rope_theta" and v == 10000.0)}
    return _write(folder, {**cfg, "architectures": ["LlamaForCausalLM"]}, state, bin_file=True)


def specforge(folder: Path, config: dict, state: dict, embed: torch.Tensor | None = None, taps=None) -> Path:
    """LlamaForCausalLMEagle3, `midlayer.*`, a frozen embed_tokens copy, ids (if any) under eagle_config."""
    extra = {"embed_tokens.weight": embed} if embed is not None else {}
    cfg = {**config, "architectures": ["LlamaForCausalLMEagle3"], "sliding_window": None, "use_sliding_window": False,
           "rope_scaling": config.get("rope_scaling"), **_outputs(taps)}
    return _write(folder, cfg, {**state, **extra})


def speculators(folder: Path, config: dict, state: dict, embed: torch.Tensor | None = None, taps=None,
                layer_type: str = "llama") -> Path:
    """Eagle3Speculator: the layer geometry as transformers' to_diff_dict writes it, the EAGLE fields and the
    ids at the top level, `layers.{i}.*`."""
    geo = {k: config[k] for k in GEOMETRY if k in config}
    for k in ("attention_bias", "mlp_bias", "rope_scaling"):
        if k in config:
            geo[k] = config[k]
    layer = AutoConfig.for_model(layer_type, **geo, num_hidden_layers=config.get("num_hidden_layers", 1)).to_diff_dict()
    cfg = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.3.0",
           "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                  "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                                  "verifier": {"name_or_path": "tiny", "architectures": ["LlamaForCausalLM"]}},
           "transformer_layer_config": layer, "draft_vocab_size": config["draft_vocab_size"],
           "norm_before_residual": config.get("norm_before_residual", False),
           "norm_before_fc": config.get("norm_before_fc", False), "fc_norm": config.get("fc_norm", False),
           "norm_output": False, "embed_requires_grad": False, "target_hidden_size": config.get("target_hidden_size"),
           "eagle_aux_hidden_state_layer_ids": taps}
    extra = {"embed_tokens.weight": embed} if embed is not None else {}
    return _write(folder, cfg, layers_names({**state, **extra}))


def modelopt(folder: Path, config: dict, state: dict, embed: torch.Tensor | None = None, taps=None) -> Path:
    """LlamaForCausalLMEagle3 from the export template, `layers.0.*`, d2t but no t2d, ids as layer outputs."""
    ids = None if taps is None else [i - 1 for i in taps]
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "bos_token_id": 0, "eos_token_id": 0, "initializer_range": 0.02,
           "model_type": "llama", "num_hidden_layers": 1, "pad_token_id": None, "tie_word_embeddings": False,
           "torch_dtype": "float16", "transformers_version": "4.55.0", "use_cache": True, "rope_scaling": None,
           "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False, "pretraining_tp": 1,
           **{k: v for k, v in config.items() if k in GEOMETRY + ("draft_vocab_size",)},
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids, "use_aux_hidden_state": True,
                            "use_input_layernorm_in_first_layer": True, "use_last_layernorm": True,
                            "use_mtp_layernorm": False, "next_layer_regular": True, "parallel_draft_step": 1,
                            "parallel_draft_heads_num_layers": None}}
    return _write(folder, cfg, layers_names({k: v for k, v in state.items() if k != "t2d"}))


def angelslim(folder: Path, config: dict, state: dict, embed: torch.Tensor | None = None, taps=None,
              newer: bool = False) -> Path:
    """Eagle3LlamaForCausalLM with its embedding copy and a stale tie_word_embeddings; the older trainer
    writes `midlayer.*`, the newer `layers.{i}.*`."""
    extra = {"embed_tokens.weight": embed} if embed is not None else {}
    cfg = {**config, "architectures": ["Eagle3LlamaForCausalLM"], "tie_word_embeddings": True, **_outputs(taps)}
    state = {**state, **extra}
    return _write(folder, cfg, layers_names(state) if newer else state)


def nemo(folder: Path, config: dict, state: dict, embed: torch.Tensor | None = None, taps=None) -> Path:
    """Everything under `model.` but lm_head; `layers.{i}.*`."""
    extra = {"embed_tokens.weight": embed} if embed is not None else {}
    named = layers_names({**state, **extra})
    cfg = {**config, "architectures": ["LlamaForCausalLMEagle3"], **_outputs(taps)}
    return _write(folder, cfg, {(k if k == "lm_head.weight" else "model." + k): v for k, v in named.items()})


WRITERS = {"SafeAILab": safeailab, "SpecForge": specforge, "speculators": speculators, "ModelOpt": modelopt,
           "AngelSlim": angelslim, "AngelSlim-newer": lambda *a, **k: angelslim(*a, **k, newer=True), "NeMo": nemo}
