"""Read an EAGLE-3 head's config.json in any published dialect into our EagleConfig and a HeadInfo.

    dialect      how it is told apart                                   where the layer geometry is
    speculators  Eagle3Speculator / speculators_model_type / transformer_layer_config   transformer_layer_config
    NeMo         LlamaEagle3*, or `model.layers.*` tensors               top level
    ModelOpt     LlamaForCausalLMEagle3 with `layers.*` tensors          top level
    SpecForge    LlamaForCausalLMEagle3 with `midlayer.*` tensors        top level
    AngelSlim    Eagle3LlamaForCausalLM                                  top level
    SafeAILab    LlamaForCausalLM (or no architectures)                  top level

The geometry goes through transformers' own config class for its model_type (llama, qwen3, qwen2), so
the defaults a release leaves out (speculators writes only what differs from them: a Qwen3 layer's
head_dim of 128, a Llama layer's hidden_size of 4096) are the ones its publisher's code read. Taps by provenance (see head_info.TAP_RULES): top-level ids are hidden-state
indices; ids under `eagle_config` follow SGLang's rule. Flags that change the function and are not
implemented are refused by name; keys nobody here knows are refused by name too, and the few known to be
bookkeeping load with a warning (core/eagle3/keys.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AutoConfig
from transformers.activations import ACT2FN
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from core.eagle3.head import EagleConfig
from core.eagle3.head_info import HeadInfo, HeadLoadError
from core.eagle3.keys import check_keys
from core.eagle3.layers import ATTN, MLP_LINEARS
from core.eagle3.tensors import Tensors, canonical, nemo_names, vocab_maps

LAYER_TYPES = ("llama", "qwen3", "qwen2")
REQUIRED = ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
# (where, key, refused when, what it would change); where: the layer config, the top level, eagle_config
FLAGS = [
    ("layer", "quantization_config", lambda v: v is not None, "quantized weights"),
    ("layer", "logit_scale", lambda v: v not in (None, 1, 1.0), "scaled logits"),
    ("layer", "is_causal", lambda v: v is False, "non-causal attention"),
    ("layer", "use_sliding_window", bool, "sliding-window attention"),
    ("layer", "layer_types", lambda v: bool(v) and any(t != "full_attention" for t in v), "sliding-window layers"),
    ("top", "num_aux_hidden_states", lambda v: v not in (None, 3), "fc over other than 3 tapped states"),
    ("top", "parallel_drafting", bool, "parallel drafting"),
    ("eagle", "use_aux_hidden_state", lambda v: v is False, "no fused target states (an EAGLE-1/2 head)"),
    ("eagle", "use_last_layernorm", lambda v: v is False, "no final norm"),
    ("eagle", "use_input_layernorm_in_first_layer", lambda v: v is False, "no input norm in the EAGLE layer"),
    ("eagle", "use_mtp_layernorm", bool, "MTP layer norms"),
    ("eagle", "parallel_draft_step", lambda v: v is not None and v > 1, "parallel draft heads"),
]


@dataclass
class HeadSpec:
    """What a checkpoint is, before any tensor is allocated: our config, its tensors under our names, and
    the plain-data account of both."""
    config: EagleConfig
    tensors: Tensors
    info: HeadInfo


def detect(raw: dict, names: set[str]) -> str:
    arch = (raw.get("architectures") or [""])[0]
    if "transformer_layer_config" in raw or "speculators_model_type" in raw or arch == "Eagle3Speculator":
        kind = raw.get("speculators_model_type", "eagle3")
        if kind != "eagle3":
            raise HeadLoadError(f"it is a speculators '{kind}' model, not an EAGLE-3 head")
        return "speculators"
    if arch.startswith("LlamaEagle3") or nemo_names(names):
        return "NeMo"
    if arch == "LlamaForCausalLMEagle3":
        return "ModelOpt" if any(n.startswith("layers.") for n in names) else "SpecForge"
    if arch == "Eagle3LlamaForCausalLM":
        return "AngelSlim"
    if arch in ("", "LlamaForCausalLM"):
        return "SafeAILab"
    raise HeadLoadError(f"its architecture '{arch}' is not an EAGLE-3 head layout this loader reads")


def layer_config(raw: dict, dialect: str):
    """The decoder layers' config, with transformers' defaults for what it leaves out."""
    flat = raw.get("transformer_layer_config") if dialect == "speculators" else raw
    if not isinstance(flat, dict):
        raise HeadLoadError("its transformer_layer_config is missing or not an object")
    kind = flat.get("model_type") or "llama"
    if kind not in LAYER_TYPES:
        raise HeadLoadError(f"its decoder layers are '{kind}'; this loader runs {', '.join(LAYER_TYPES)} layers")
    missing = [k for k in REQUIRED if k not in flat]
    if missing and dialect != "speculators":  # speculators writes only what differs from the class defaults
        raise HeadLoadError(f"its config does not name {', '.join(missing)}")
    kwargs = {k: v for k, v in flat.items() if k not in ("model_type", "architectures", "auto_map")}
    try:
        return flat, AutoConfig.for_model(kind, **kwargs)
    except Exception as exc:  # noqa: BLE001 - transformers' validators raise many kinds; one line says which
        first = (str(exc).strip().splitlines() or [""])[0]
        raise HeadLoadError(f"its config is not a {kind} layer config ({type(exc).__name__}: {first})") from None


def refusals(raw: dict, flat: dict, dialect: str) -> list[str]:
    """Flags set to something that changes the function and is not implemented here, by name."""
    where = {"layer": flat, "top": raw, "eagle": _eagle_config(raw)}
    out = [f"{key}={where[w][key]!r} ({why})" for w, key, bad, why in FLAGS if key in where[w] and bad(where[w][key])]
    window = flat.get("sliding_window")
    if isinstance(window, int) and "use_sliding_window" not in flat:  # vLLM applies a Llama draft's window
        out.append(f"sliding_window={window} (sliding-window attention)")
    norm_output = raw.get("norm_output", flat.get("norm_output"))
    if dialect == "speculators" and norm_output:
        out.append("norm_output=True (speculators' Eagle 3.1: the normed state is fed back between draft steps)")
    if dialect != "speculators" and norm_output is False:
        out.append("norm_output=False (SpecForge: logits from the state without the final norm)")
    if _flag(raw, flat, "norm_before_fc") and _flag(raw, flat, "fc_norm"):
        out.append("both norm_before_fc and fc_norm (speculators holds them exclusive)")
    return out


def _flag(raw: dict, flat: dict, key: str):
    return raw.get(key, flat.get(key))


def _eagle_config(raw: dict) -> dict:
    block = raw.get("eagle_config") or {}
    if not isinstance(block, dict):
        raise HeadLoadError("its eagle_config is not an object")
    return block


def check_sizes(c: EagleConfig) -> None:
    """Every size is a positive whole number and the heads divide evenly, before anything is built from them."""
    sizes = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size",
             "draft_vocab_size", "max_position_embeddings", "head_dim", "target_hidden_size")
    bad = [f"{k}={getattr(c, k)!r}" for k in sizes if getattr(c, k) is not None
           and (not isinstance(getattr(c, k), int) or isinstance(getattr(c, k), bool) or getattr(c, k) <= 0)]
    if bad:
        raise HeadLoadError(f"its config has sizes that are not positive whole numbers: {', '.join(bad)}")
    if c.num_attention_heads % c.num_key_value_heads or not c.rms_norm_eps > 0 or not c.rope_theta > 0:
        raise HeadLoadError(f"its config has {c.num_attention_heads} attention heads over {c.num_key_value_heads} "
                            f"key/value heads, rms_norm_eps {c.rms_norm_eps}, rope_theta {c.rope_theta}")


def read_taps(raw: dict) -> tuple[list[int] | None, str, tuple[int, ...] | None]:
    """(hidden-state indices or None for the default, the rule that chose them, the ids as written)."""
    top = raw.get("eagle_aux_hidden_state_layer_ids")
    nested = _eagle_config(raw).get("eagle_aux_hidden_state_layer_ids")
    for ids in (top, nested):
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, int) for i in ids)):
            raise HeadLoadError(f"its eagle_aux_hidden_state_layer_ids {ids!r} are not a list of layer numbers")
        if ids and len(ids) != 3:
            raise HeadLoadError(f"its eagle_aux_hidden_state_layer_ids {ids} name {len(ids)} states; fc here fuses 3")
    if nested:
        rule = "eagle_config+1" if nested[0] == 1 else "eagle_config"
        resolved = [i + 1 for i in nested] if rule == "eagle_config+1" else list(nested)
    if top:
        if nested and resolved != list(top):
            raise HeadLoadError(f"its top-level eagle_aux_hidden_state_layer_ids {top} and eagle_config's {nested} "
                                f"(read as {resolved}) disagree")
        return list(top), "top-level", tuple(top)
    if nested:
        return resolved, rule, tuple(nested)
    return None, "default", None


def geometry(hf) -> dict:
    """EagleConfig fields read off transformers' config of the decoder layers."""
    rope = dict(getattr(hf, "rope_parameters", None) or {})
    theta = rope.pop("rope_theta", getattr(hf, "rope_theta", 10000.0))
    rope.pop("type", None)
    kind = rope.get("rope_type", "default")
    if "mrope_section" in rope or (kind != "default" and kind not in ROPE_INIT_FUNCTIONS):
        raise HeadLoadError(f"its rope_scaling {rope} is not one transformers' rotary functions compute")
    if hf.hidden_act not in ACT2FN:
        raise HeadLoadError(f"its hidden_act '{hf.hidden_act}' is not an activation transformers knows")
    return dict(hidden_size=hf.hidden_size, num_attention_heads=hf.num_attention_heads,
                num_key_value_heads=hf.num_key_value_heads or hf.num_attention_heads,
                intermediate_size=hf.intermediate_size, vocab_size=hf.vocab_size, rms_norm_eps=hf.rms_norm_eps,
                rope_theta=float(theta), max_position_embeddings=hf.max_position_embeddings,
                head_dim=getattr(hf, "head_dim", None), hidden_act=hf.hidden_act,
                rope_scaling=None if kind == "default" else rope)


def _draft_vocab(raw: dict, flat: dict, t: Tensors, vocab: int, notes: list[str]) -> int:
    size = _flag(raw, flat, "draft_vocab_size")
    if size is None:
        head = t.state.get("lm_head.weight")
        size = int(head.shape[0]) if head is not None else vocab
        notes.append(f"draft_vocab_size absent: {size}, the rows of its lm_head")
    return int(size)


def structure(raw: dict, flat: dict, hf, t: Tensors, dialect: str, notes: list[str]) -> dict:
    """The variants: layers, biases and q/k norms from the weights (and the flags that require them),
    the norm flags read where the dialect keeps them."""
    biases = set(t.biases)
    biases |= set(ATTN) if flat.get("attention_bias") else set()
    biases |= set(MLP_LINEARS) if flat.get("mlp_bias") else set()
    if flat.get("num_hidden_layers", 1) != t.layers:
        notes.append(f"num_hidden_layers={flat.get('num_hidden_layers')} in the config; the weights hold "
                     f"{t.layers} (the weights decide)")
    if flat.get("tie_word_embeddings") and "lm_head.weight" in t.state:
        notes.append("tie_word_embeddings ignored: the head carries its own lm_head")
    residual = _flag(raw, flat, "norm_before_residual")
    if residual is None and dialect == "speculators":
        notes.append("norm_before_residual absent: false, speculators' own default (vLLM's reader assumes true)")
    return dict(num_hidden_layers=t.layers, biases=tuple(b for b in ATTN + MLP_LINEARS + ("fc",) if b in biases),
                qk_norm=t.qk_norm or hf.model_type == "qwen3", norm_before_residual=bool(residual),
                norm_before_fc=bool(_flag(raw, flat, "norm_before_fc")), fc_norm=bool(_flag(raw, flat, "fc_norm")))


def variants(c: EagleConfig) -> tuple[str, ...]:
    """The function-changing variants a config carries, under their publishers' names."""
    out = [k for k in ("norm_before_residual", "norm_before_fc", "fc_norm") if getattr(c, k)]
    if c.qk_norm:
        out.append("q_norm/k_norm")
    if c.biases:
        out.append("bias on " + ",".join(c.biases))
    if c.rope_scaling:
        out.append(f"rope_scaling {c.rope_scaling.get('rope_type')}")
    if c.hidden_act != "silu":
        out.append(f"hidden_act {c.hidden_act}")
    if c.target_hidden_size and c.target_hidden_size != c.hidden_size:
        out.append(f"cross-width (target_hidden_size {c.target_hidden_size})")
    return tuple(out)


def read_head(raw: dict, state: dict[str, torch.Tensor]) -> HeadSpec:
    """config.json (parsed) and the checkpoint's tensors -> HeadSpec; HeadLoadError (one line) when the
    checkpoint is in no dialect we read or sets something we do not implement."""
    dialect = detect(raw, set(state))
    t = canonical(state)
    flat, hf = layer_config(raw, dialect)
    refused = refusals(raw, flat, dialect)
    if refused:
        raise HeadLoadError(f"it sets {'; '.join(refused)}: not implemented here")
    warnings = check_keys(raw, flat, hf.model_type, dialect == "speculators")
    ids, rule, written = read_taps(raw)
    notes: list[str] = []
    if dialect == "AngelSlim":
        older = any(k.startswith("midlayer.") for k in state)
        notes.append("AngelSlim's " + ("older trainer (midlayer.*)" if older else "newer trainer (layers.*)"))
    geo = geometry(hf)
    cfg = EagleConfig(**geo, draft_vocab_size=_draft_vocab(raw, flat, t, geo["vocab_size"], notes),
                      target_hidden_size=_flag(raw, flat, "target_hidden_size"),
                      eagle_aux_hidden_state_layer_ids=ids, **structure(raw, flat, hf, t, dialect, notes))
    check_sizes(cfg)
    vocab_maps(t, cfg.vocab_size, cfg.draft_vocab_size)
    info = HeadInfo(dialect=dialect, tap_rule=rule, draft_vocab=cfg.draft_vocab_size, vocab=cfg.vocab_size,
                    layers=cfg.num_hidden_layers, config_ids=written, variants=variants(cfg), notes=tuple(t.notes + notes),
                    warnings=tuple(warnings))
    return HeadSpec(cfg, t, info)
