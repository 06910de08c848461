"""The shipped head (assets/models/eagle3), rewritten in each publisher's layout, loads as the head it is
and drafts exactly as the shipped head does: the same trees (tokens, parents, q, scores), the same steps,
output equal to AR. Writing the default taps explicitly, in the numbering each publisher uses, must not
change a single tree."""
import json

import pytest
import torch
from safetensors.torch import load_file

from core.eagle3.drafter import EagleDrafter
from core.eagle3.loading import DEFAULT_HEAD, load_head
from core.engine import Session
from core.methods import build_method
from tests.head_dialects import WRITERS

METHODS = [("talon", {}), ("static", dict(N=12, K=3, depth=4))]  # the paper preset, and a small static tree
NEW = 32
DIALECT = {"AngelSlim-newer": "AngelSlim"}


def shipped() -> tuple[dict, dict]:
    return json.loads((DEFAULT_HEAD / "config.json").read_text()), load_file(DEFAULT_HEAD / "model.safetensors")


def load(target, folder):
    return load_head(folder, target.config.hidden_size, target.vocab_size, target.device, target.dtype,
                     target.num_layers, target.body.embed_tokens.weight)


def decode(target, head, prompts) -> list:
    """Every step of every run, as what a tree drew and what the step committed."""
    runs = []
    for prompt in prompts:
        for name, knobs in METHODS:
            res = Session(target, build_method(name, **knobs), prompt, max_new_tokens=NEW,
                          draft=EagleDrafter(head, target)).generate()
            runs.append((res.output_ids, [([(n.token_id, n.parent, n.q, n.score) for n in t.nodes], t.accepted_path,
                                           t.committed_ids, t.delta) for t in res.traces]))
    return runs


@pytest.fixture(scope="module")
def reference(target, heldout_prompts):
    head = load(target, DEFAULT_HEAD)
    assert head.info.dialect == "SafeAILab" and head.info.taps == (2, 6, 9) and head.info.tap_rule == "default"
    return decode(target, head, heldout_prompts[:2])


@pytest.mark.parametrize("taps", [None, [2, 6, 9]], ids=["default taps", "taps written out"])
@pytest.mark.parametrize("dialect", list(WRITERS))
def test_the_shipped_head_in_each_dialect_drafts_the_same_trees(dialect, taps, target, heldout_prompts, reference,
                                                                ar_reference, tmp_path):
    config, state = shipped()
    embed = target.body.embed_tokens.weight.detach().clone().cpu()
    folder = WRITERS[dialect](tmp_path / dialect, config, state, embed=embed, taps=taps)
    head = load(target, folder)
    info = head.info
    assert info.dialect == DIALECT.get(dialect, dialect) and info.taps == (2, 6, 9)
    assert info.draft_vocab == 4096 and info.layers == 1 and info.variants == ()  # an equal embedding is no variant
    assert not hasattr(head, "embed_tokens")
    if taps is not None and dialect != "SafeAILab":  # SafeAILab's releases never name their taps
        assert info.tap_rule == ("top-level" if dialect == "speculators" else "eagle_config+1")
        assert info.config_ids == ((2, 6, 9) if dialect == "speculators" else (1, 5, 8))
    runs = decode(target, head, heldout_prompts[:2])
    assert runs == reference  # same trees, same steps, bit for bit
    for (out, _), prompt in zip(runs[:: len(METHODS)], heldout_prompts[:2]):
        assert out == ar_reference(target, prompt, NEW)[1]


def test_modelopt_has_no_t2d_and_gets_one_derived_from_d2t(target, tmp_path):
    config, state = shipped()
    folder = WRITERS["ModelOpt"](tmp_path / "mo", config, state)
    head = load(target, folder)
    assert torch.equal(head.t2d.cpu(), state["t2d"]) and "t2d derived from d2t" in head.info.notes


def test_the_info_line_names_dialect_taps_rule_and_vocabulary(target, tmp_path):
    config, state = shipped()
    head = load(target, WRITERS["SpecForge"](tmp_path / "sf", config, state, taps=[2, 6, 9]))
    line = EagleDrafter(head, target).info.line()
    assert line.startswith("SpecForge layout; taps 2,6,9 from [1, 5, 8] (eagle_config+1)") and "4096 of 8192" in line


def test_a_nemo_head_with_its_vocabulary_maps_outside_model_is_still_nemo(target, tmp_path):
    """Issue 34, item 7: some NeMo exports keep d2t / t2d (and lm_head) at the top level beside `model.*`:
    `model.` is stripped whenever `model.layers.` is present, and the head is the same one."""
    config, state = shipped()
    folder = WRITERS["NeMo"](tmp_path / "nemo", config, state)
    nemo = load_file(folder / "model.safetensors")
    moved = {(k[len("model."):] if k in ("model.d2t", "model.t2d") else k): v for k, v in nemo.items()}
    assert "d2t" in moved and "t2d" in moved and any(k.startswith("model.layers.") for k in moved)
    from safetensors.torch import save_file
    save_file(moved, folder / "model.safetensors")
    head = load(target, folder)
    reference = load(target, DEFAULT_HEAD)
    assert head.info.dialect == "NeMo" and "NeMo `model.` prefix dropped" in head.info.notes
    ours, theirs = head.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    save_file({**moved, "norm.weight": moved["model.norm.weight"].clone()}, folder / "model.safetensors")
    from core.eagle3.head_info import HeadLoadError
    with pytest.raises(HeadLoadError, match="both model.norm.weight and norm.weight"):
        load(target, folder)


def _with_config(folder, edit):
    cfg = json.loads((folder / "config.json").read_text())
    edit(cfg)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize("dialect, edit, named", [
    ("SafeAILab", lambda c: c.update(eagle_scale=0.5), "eagle_scale"),
    ("ModelOpt", lambda c: c["eagle_config"].update(eagle_reuse_base_decoder=True), "eagle_config.eagle_reuse_base_decoder"),
    ("speculators", lambda c: c["transformer_layer_config"].update(attn_logit_softcapping=30.0),
     "transformer_layer_config.attn_logit_softcapping"),
])
def test_a_config_key_nobody_here_knows_is_refused_by_name(dialect, edit, named, target, tmp_path):
    """Issue 34, item 8: an unknown key used to load silently; it is now named, and the head refused."""
    from core.eagle3.head_info import HeadLoadError
    config, state = shipped()
    folder = _with_config(WRITERS[dialect](tmp_path / dialect, config, state), edit)
    with pytest.raises(HeadLoadError) as err:
        load(target, folder)
    assert named in str(err.value) and "does not know" in str(err.value) and "\n" not in str(err.value)


def test_keys_known_to_be_harmless_load_with_a_warning_the_cli_and_the_page_show(target, tmp_path, capsys):
    """speculators' bookkeeping (its version, its proposal settings) cannot change the head: it loads, and the
    warning naming those keys reaches the CLI's drafter line and the page's compatibility readout."""
    from cli import generate
    from core.eagle3.readout import compat_readout
    from viz.html import compat_html
    config, state = shipped()
    folder = WRITERS["speculators"](tmp_path / "spec", config, state)
    head = load(target, folder)
    assert len(head.info.warnings) == 1 and "speculators_config" in head.info.warnings[0]
    assert "speculators_version" in head.info.warnings[0] and "warning: config keys ignored" in head.info.line()
    assert load(target, DEFAULT_HEAD).info.warnings == ()  # the shipped head has nothing to warn about
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "def add(a, b):"}) + "\n")
    generate.main(["--method", "talon", "--drafter", "eagle3", "--draft", str(folder), "--prompts", str(prompts),
                   "--max-new-tokens", "2"])
    assert "warning: config keys ignored" in capsys.readouterr().err
    drafter = EagleDrafter(head, target)
    traces = Session(target, build_method("talon"), "def f(x):", max_new_tokens=4, draft=drafter).generate().traces
    page = compat_html(compat_readout(traces, drafter.head_info(), drafter.draft_vocab))
    assert 'role="alert"' in page and "speculators_config" in page
