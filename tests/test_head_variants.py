"""Every variant a published head may carry is implemented or refused by name. Each implemented one, on
random weights written in its publisher's layout, matches a reference forward written from the
publisher's code (tests/eagle3_reference.py; max |Δlogit| ≤ 1e-4 in fp32) and decodes losslessly with a
tiny random target. Unknown tensors and function-changing flags are refused in one line naming them;
known-harmless extras are accepted quietly."""
import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file

from core.ar import ARMethod
from core.eagle3.drafter import EagleDrafter
from core.eagle3.head import EagleConfig, EagleHead
from core.eagle3.layers import ATTN, MLP_LINEARS
from core.eagle3.loading import HeadLoadError, load_head
from core.engine import Session
from core.methods import build_method
from core.model.causal_lm import causal_mask
from tests.eagle3_reference import Ref, reference_logits
from tests.head_dialects import WRITERS, layers_names
from tests.tiny_models import tiny_lm

TINY = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64, vocab_size=64,
            draft_vocab_size=48, max_position_embeddings=128)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}  # with θ = 100 the four frequencies hit all three branches
# name -> (EagleConfig fields, writer, the variant as HeadInfo names it)
VARIANTS = {
    "norm_before_residual": (dict(norm_before_residual=True), "speculators", "norm_before_residual"),
    "qwen3 q/k norms": (dict(qk_norm=True, head_dim=8), "speculators", "q_norm/k_norm"),
    "attention and MLP biases": (dict(biases=ATTN + MLP_LINEARS), "speculators", "bias on q_proj"),
    "fc bias": (dict(biases=("fc",)), "SpecForge", "bias on fc"),
    "norm_before_fc": (dict(norm_before_fc=True), "speculators", "norm_before_fc"),
    "fc_norm": (dict(fc_norm=True), "speculators", "fc_norm"),
    "fc_norm (SpecForge)": (dict(fc_norm=True), "SpecForge", "fc_norm"),
    "two layers": (dict(num_hidden_layers=2), "speculators", None),
    "three layers, ModelOpt": (dict(num_hidden_layers=3), "ModelOpt", None),
    "rope_scaling linear": (dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "speculators",
                            "rope_scaling linear"),
    "rope_scaling llama3": (dict(rope_theta=100.0, rope_scaling=LLAMA3), "speculators", "rope_scaling llama3"),
    "hidden_act": (dict(hidden_act="gelu_pytorch_tanh"), "speculators", "hidden_act gelu_pytorch_tanh"),
    "cross-width": (dict(hidden_size=16, num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                         target_hidden_size=32, own_embedding=True), "SpecForge", "cross-width"),
}
PROMPTS = ([5, 17, 33, 8], [9, 9, 40, 2, 11, 30, 7])
TREES = [("chain", dict(gamma=4)), ("static", dict(N=24, K=6, depth=3)), ("talon", dict(N=32, K=8, mu=0.05))]


@pytest.fixture(scope="module")
def tiny_target():
    return tiny_lm("llama", seed=0, num_hidden_layers=4)


def random_head(cfg: EagleConfig, seed: int = 0) -> dict:
    """Random weights in our names: norms near 1, small biases, a random draft vocabulary."""
    torch.manual_seed(seed)
    head = EagleHead(cfg)
    with torch.no_grad():
        for name, p in head.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0, 0.1)
            elif p.dim() == 1:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0, 3 / p.shape[1] ** 0.5)
        ids = torch.randperm(cfg.vocab_size)[: cfg.draft_vocab_size].sort().values
        head.d2t.copy_(ids - torch.arange(cfg.draft_vocab_size))
        head.t2d.zero_()
        head.t2d[ids] = True
    return head.state_dict()


def write_variant(name: str, folder) -> tuple[EagleConfig, object]:
    fields, writer, _ = VARIANTS[name]
    cfg = EagleConfig(**{**TINY, **fields})
    config = cfg.to_dict()
    kind = {"layer_type": "qwen3"} if cfg.qk_norm else {}
    return cfg, WRITERS[writer](folder, config, random_head(cfg), **kind)


def load(target, folder):
    return load_head(folder, target.config.hidden_size, target.vocab_size, target.device, torch.float32,
                     target.num_layers, target.body.embed_tokens.weight)


def ref_of(c: EagleConfig) -> Ref:
    return Ref(c.num_attention_heads, c.num_key_value_heads, c.hd, c.rms_norm_eps, c.rope_theta, c.rope_scaling,
               c.hidden_act, c.norm_before_residual, c.norm_before_fc, c.fc_norm)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_variant_matches_the_publishers_forward(name, tiny_target, tmp_path):
    cfg, folder = write_variant(name, tmp_path / "head")
    head = load(tiny_target, folder)
    label = VARIANTS[name][2]
    assert head.info.layers == cfg.num_hidden_layers and (label is None or any(label in v for v in head.info.variants))
    w = {k.removeprefix("model."): v.float() for k, v in layers_names(load_file(folder / "model.safetensors")).items()}
    T = 20
    torch.manual_seed(1)
    feats = 2 * torch.randn(T, cfg.feature_size)
    emb = EagleDrafter(head, tiny_target).embed(torch.randint(0, 64, (T,)).tolist())
    with torch.no_grad():
        state = head(emb[None], head.fuse(feats)[None], torch.arange(T)[None], lambda i, k, v: (k, v),
                     causal_mask(0, T, emb.device))[0]
        ours = head.logits(state)
        ref = reference_logits(w, ref_of(cfg), feats, emb)
    assert ours.shape == ref.shape == (T, cfg.draft_vocab_size)
    assert (ours - ref).abs().max().item() <= 1e-4


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_variant_decodes_losslessly(name, tiny_target, tmp_path):
    _, folder = write_variant(name, tmp_path / "head")
    head = load(tiny_target, folder)
    accepted = 0
    for prompt in PROMPTS:
        ar = Session(tiny_target, ARMethod(), prompt, max_new_tokens=24).generate().output_ids
        for method, knobs in TREES:
            got = Session(tiny_target, build_method(method, **knobs), prompt, max_new_tokens=24,
                          draft=EagleDrafter(head, tiny_target)).generate()
            assert got.output_ids == ar, f"{name}: {method}"
            accepted += sum(t.accepted for t in got.traces)
    assert accepted > 0  # a random head is rarely right, but the accepting path ran too


def rewrite(folder, edit) -> None:
    """Apply `edit` to the config.json in `folder`."""
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    edit(cfg)
    path.write_text(json.dumps(cfg))


def refused(target, folder) -> str:
    with pytest.raises(HeadLoadError) as err:
        load(target, folder)
    assert "\n" not in str(err.value)
    return str(err.value)


FLAG_EDITS = {
    "norm_output": lambda c: c.update(norm_output=True),
    "use_sliding_window": lambda c: c["transformer_layer_config"].update(use_sliding_window=True, sliding_window=8),
    "quantization_config": lambda c: c["transformer_layer_config"].update(quantization_config={"quant_method": "fp8"}),
    "use_aux_hidden_state": lambda c: c.update(eagle_config={"use_aux_hidden_state": False}),
    "parallel_draft_step": lambda c: c.update(eagle_config={"parallel_draft_step": 3}),
    "fc_norm": lambda c: c.update(norm_before_fc=True, fc_norm=True),
}


@pytest.mark.parametrize("flag", list(FLAG_EDITS))
def test_a_function_changing_flag_is_refused_by_name(flag, tiny_target, tmp_path):
    _, folder = write_variant("two layers", tmp_path / "head")
    rewrite(folder, FLAG_EDITS[flag])
    assert flag in refused(tiny_target, folder)


@pytest.mark.parametrize("extra", ["mask_hidden", "layers.0.self_attn.rotary_scale", "layers.0.mlp.gate_proj.weight_scale"])
def test_an_unknown_tensor_is_refused_by_name(extra, tiny_target, tmp_path):
    cfg = EagleConfig(**TINY)
    state = {**random_head(cfg), extra: torch.ones(4)}
    folder = WRITERS["speculators"](tmp_path / "head", cfg.to_dict(), state)
    message = refused(tiny_target, folder)
    assert extra.replace("layers.0.", "midlayer.") in message and "does not understand" in message


def test_harmless_extras_are_accepted_quietly(tiny_target, tmp_path):
    """An embed_tokens copy equal to the target's and an identity t2d (equal vocabularies) change nothing;
    a config without draft_vocab_size is read as drafting the whole vocabulary."""
    cfg = EagleConfig(**{**TINY, "draft_vocab_size": 64})
    state = {k: v for k, v in random_head(dataclasses.replace(cfg, draft_vocab_size=48)).items() if k != "lm_head.weight"}
    state["lm_head.weight"] = torch.randn(64, 32)
    state["t2d"], state["d2t"] = torch.ones(64, dtype=torch.bool), torch.zeros(64, dtype=torch.long)
    config = {k: v for k, v in cfg.to_dict().items() if k != "draft_vocab_size"}
    folder = WRITERS["SpecForge"](tmp_path / "head", config, state, embed=tiny_target.body.embed_tokens.weight.detach())
    head = load(tiny_target, folder)
    assert not head.reduced and head.info.variants == () and not hasattr(head, "embed_tokens")
    assert any("copy of the target's" in n for n in head.info.notes)


def test_an_embedding_that_differs_from_the_targets_is_the_heads_own(tiny_target, tmp_path):
    cfg = EagleConfig(**TINY)
    folder = WRITERS["SpecForge"](tmp_path / "head", cfg.to_dict(), random_head(cfg), embed=torch.randn(64, 32))
    head = load(tiny_target, folder)
    assert hasattr(head, "embed_tokens") and any("own embed_tokens" in v for v in head.info.variants)


@pytest.mark.parametrize("case,expect", [
    ("narrow without embedding", "carries no embed_tokens"),
    ("taps disagree", "disagree"),
    ("unknown activation", "hidden_act 'swiglu_x'"),
    ("mrope", "rope_scaling"),
    ("four taps", "name 4 states"),
])
def test_what_cannot_be_read_is_refused_in_one_line(case, expect, tiny_target, tmp_path):
    name = "cross-width" if case == "narrow without embedding" else "two layers"
    _, folder = write_variant(name, tmp_path / "head")
    if case == "narrow without embedding":
        state = load_file(folder / "model.safetensors")
        state.pop("embed_tokens.weight")
        WRITERS["SpecForge"](folder, json.loads((folder / "config.json").read_text()), state)
    edits = {"taps disagree": lambda c: c.update(eagle_aux_hidden_state_layer_ids=[1, 2, 3],
                                                 eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}),
             "unknown activation": lambda c: c["transformer_layer_config"].update(hidden_act="swiglu_x"),
             "mrope": lambda c: c["transformer_layer_config"].update(
                 rope_parameters={"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 2]}),
             "four taps": lambda c: c.update(eagle_aux_hidden_state_layer_ids=[1, 2, 3, 4])}
    if case in edits:
        rewrite(folder, edits[case])
    assert expect in refused(tiny_target, folder)


def test_speculators_leaves_out_defaults_and_the_layer_class_supplies_them(tiny_target, tmp_path):
    """speculators writes its transformer_layer_config as transformers' to_diff_dict: a Qwen3 layer's head_dim
    of 128 may be missing, and so may a norm_before_residual read by two engines with two defaults."""
    cfg = EagleConfig(**{**TINY, "qk_norm": True, "head_dim": 128})
    folder = WRITERS["speculators"](tmp_path / "head", cfg.to_dict(), random_head(cfg), layer_type="qwen3")
    rewrite(folder, lambda c: (c["transformer_layer_config"].pop("head_dim", None), c.pop("norm_before_residual")))
    head = load(tiny_target, folder)
    assert head.config.hd == 128 and not head.config.norm_before_residual
    assert any("speculators' own default" in n for n in head.info.notes)


@pytest.mark.parametrize("edit,expect", [
    (lambda c: c["transformer_layer_config"].update(vocab_size=10 ** 12), "maps to a vocabulary of 1000000000000"),
    (lambda c: c["transformer_layer_config"].update(intermediate_size=10 ** 9), "does not match its config"),
    (lambda c: c["transformer_layer_config"].update(hidden_size="32"), "field 'hidden_size'"),
    (lambda c: c.update(draft_vocab_size=0), "not positive whole numbers: draft_vocab_size=0"),
    (lambda c: c["transformer_layer_config"].update(num_key_value_heads=3), "4 attention heads over 3"),
    (lambda c: c.update(eagle_config="yes"), "eagle_config is not an object"),
])
def test_a_config_is_checked_before_anything_is_allocated_from_it(edit, expect, tiny_target, tmp_path):
    _, folder = write_variant("two layers", tmp_path / "head")
    rewrite(folder, edit)
    assert expect in refused(tiny_target, folder)
