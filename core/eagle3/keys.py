"""Which keys of an EAGLE-3 head's config.json this loader understands, so none is ignored silently.

Three kinds. Keys the loader reads, or that transformers' own config class of the decoder layers declares
(now, or as older releases wrote every config: LEGACY)
(core/eagle3/dialects.py hands the layer geometry to it, and refuses by name the values of those that change
the function and are not implemented): accepted. Keys known to be bookkeeping or training-only in some
publisher's layout (HARMLESS): accepted with a warning naming them, which the CLI's drafter line and the
page's compatibility readout show. Anything else: refused by name, since a key that changed the head's
function would otherwise be dropped without a word.
"""
from __future__ import annotations

from functools import lru_cache

from transformers import AutoConfig, PretrainedConfig

from core.eagle3.head_info import HeadLoadError

READ = frozenset({  # read by core/eagle3/dialects.py (the dialect, the taps, the variants and their refusals)
    "architectures", "model_type", "auto_map", "transformer_layer_config", "speculators_model_type", "eagle_config",
    "eagle_aux_hidden_state_layer_ids", "draft_vocab_size", "target_hidden_size", "norm_before_residual",
    "norm_before_fc", "fc_norm", "norm_output", "num_aux_hidden_states", "parallel_drafting", "quantization_config",
    "logit_scale", "is_causal", "use_sliding_window", "sliding_window", "layer_types", "attention_bias", "mlp_bias",
    "num_hidden_layers", "tie_word_embeddings", "rope_scaling", "rope_parameters", "rope_theta", "head_dim",
    "hidden_act", "torch_dtype", "dtype", "transformers_version"})
LEGACY = frozenset({  # what older transformers' PretrainedConfig.to_dict wrote into every config (generation
    # defaults and training switches): read by no forward
    "add_cross_attention", "bad_words_ids", "begin_suppress_tokens", "chunk_size_feed_forward",
    "cross_attention_hidden_size", "decoder_start_token_id", "diversity_penalty", "do_sample", "early_stopping",
    "encoder_no_repeat_ngram_size", "exponential_decay_length_penalty", "finetuning_task", "forced_bos_token_id",
    "forced_eos_token_id", "is_decoder", "length_penalty", "max_length", "min_length", "no_repeat_ngram_size",
    "num_beam_groups", "num_beams", "num_return_sequences", "output_scores", "prefix", "remove_invalid_values",
    "repetition_penalty", "return_dict_in_generate", "sep_token_id", "suppress_tokens", "task_specific_params",
    "temperature", "tf_legacy_loss", "tie_encoder_decoder", "tokenizer_class", "top_k", "top_p", "torchscript",
    "typical_p", "use_bfloat16", "pruned_heads", "cross_attention_hidden_size"})
EAGLE_READ = frozenset({"eagle_aux_hidden_state_layer_ids", "use_aux_hidden_state", "use_last_layernorm",
                        "use_input_layernorm_in_first_layer", "use_mtp_layernorm", "parallel_draft_step"})
HARMLESS = {  # key -> why it cannot change what the head computes at inference
    "speculators_version": "speculators' format version",
    "speculators_config": "speculators' proposal methods and verifier name (the engine's settings, not the head's)",
    "embed_requires_grad": "speculators: whether training updated the embedding (the weights say what it is)",
    "has_no_defaults_at_init": "speculators' config-class bookkeeping",
    "next_layer_regular": "ModelOpt's export template: the decoder layer is a regular one",
    "parallel_draft_heads_num_layers": "ModelOpt: layers of parallel draft heads, which a head without "
                                       "parallel_draft_step > 1 does not have",
}


@lru_cache(maxsize=None)
def declared(kind: str) -> frozenset[str]:
    """The keys transformers' config class for `kind` (llama, qwen3, qwen2) declares, its base class's included."""
    return frozenset(AutoConfig.for_model(kind).to_dict()) | frozenset(PretrainedConfig().to_dict())


def check_keys(raw: dict, layer: dict, kind: str, speculators: bool) -> list[str]:
    """The warning for the harmless keys present ([] when none); HeadLoadError naming every key not
    understood. `layer`: the decoder layers' config (speculators' transformer_layer_config, else `raw`)."""
    known = READ | LEGACY | declared(kind)
    block = raw.get("eagle_config") if isinstance(raw.get("eagle_config"), dict) else {}
    places = [("", raw), ("eagle_config.", block)] + ([("transformer_layer_config.", layer)] if speculators else [])
    unknown, harmless = [], []
    for prefix, keys, allowed in ((p, d, EAGLE_READ if p == "eagle_config." else known) for p, d in places):
        for key in keys:
            if key in allowed:
                continue
            (harmless if key in HARMLESS else unknown).append(prefix + key)
    if unknown:
        raise HeadLoadError(f"its config sets {', '.join(sorted(unknown))}: key(s) this loader does not know, so "
                            "it cannot tell whether they change the head (it would otherwise ignore them)")
    if not harmless:
        return []
    return [f"config keys ignored, known not to change the head at inference: {', '.join(sorted(harmless))}"]
