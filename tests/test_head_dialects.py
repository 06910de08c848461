"""The shipped head (assets/models/eagle3), rewritten in each publisher's layout, loads as the head it is
and drafts exactly as the shipped head does: the same trees (tokens, parents, q, scores), the same steps,
output equal to AR. Writing the default taps explicitly, in the numbering each publisher uses, must not
change a single tree."""
import json

import pytest
import torch
from safetensors.torch import load_file

from core.eagle3_drafter import EagleDrafter
from core.eagle3_io import DEFAULT_HEAD, load_head
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
