"""The target model: our own forward over a Hugging Face causal LM's weights, and what it runs on.

Entry point: causal_lm.py (CausalLM.forward over explicit positions, mask and cache slots; named for the class
it holds, so `core.model.causal_lm` never reads as "model.model"). Then, in reading order:

    kv_cache.py        the position-indexed KV cache (rollback is free; one compaction after a tree accept)
    fused_layer.py     a decoder layer read once into plain tensors, its projections stacked
    linear_kernels.py  which CPU kernel computes each product, chosen per row count on this machine
    cost_cache.py      measured plans and cost curves on disk, kept while they still describe this machine
    compiled_layer.py  `--compile`: a layer's two dense halves through torch.compile (CausalLM.compile_layers)
    loading.py         a local folder or Hub id -> CausalLM, safetensors only; device.py: which torch device
    chat.py            a prompt in its tokenizer's chat template, or raw
    real_models.py     real pretrained models fetched offline by short name (cli/get_model.py)
    layer_heads.py     per-layer exit heads (SpecBound's paper heads), then exit_heads.py: the shared adapters,
                       the logit lens and `heads_for` (which kind a target has)

Why the exit heads live here and not in specbound/: they are the target's own readouts after layer ℓ, stored
beside its weights, and both SpecBound and the self drafter (drafters/) read them; here neither package has
to import the other.
"""
