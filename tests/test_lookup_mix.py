"""lookup_mix: a model drafter's q with prompt lookup's mixed in. Where the path ends in an n-gram seen earlier, q
is (1 − λ)·q_drafter + λ·q_lookup, elsewhere the drafter's own; every tree and chain still equals AR (greedy), the
knob reaches the drafter from every entry point, and a share outside (0, 1] is refused in one line. Sampling:
tests/test_drafters.py (eagle3-mix)."""
import pytest
import torch

from cli.bench import drafter_of, parse_spec
from core.ar import ARMethod
from core.draft_tree import DraftTree
from core.drafter_registry import drafter_factory
from core.drafters.contract import BaseDrafter
from core.drafters.lookup_mix import LookupMix
from core.eagle3.drafter import EagleDrafter
from core.engine import Session
from core.methods import build_method
from core.trace import ROOT
from tests.test_drafters import TREES, head_of
from tests.tiny_heads import write_tiny_head
from tests.tiny_models import tiny_lm

PROMPT = [5, 17, 33, 8, 5, 17, 33, 8, 5, 17]  # "5 17" has been followed by 33 twice


class Fixed(BaseDrafter):
    """A drafter whose rows are fixed logits over a reduced vocabulary: the even ids 0, 2, …, 38."""
    name = "fixed"
    columns = torch.arange(0, 40, 2)

    def __init__(self) -> None:
        self.z = torch.linspace(-1.0, 1.0, 20)

    def propose(self, frontier, tree):
        return self.z.expand(len(frontier), -1).clone()  # (F, 20)

    def begin(self, ids):
        pass

    def prefill(self, ids, feats, max_len):
        pass

    def fresh(self):
        return Fixed()


def test_q_is_the_drafters_where_no_ngram_matched_and_the_mixture_where_one_did():
    V, text = 40, [4, 16, 32, 8, 4, 16, 32, 8, 4, 16, 33, 8, 4]
    mixed = LookupMix(Fixed(), V, 0.4)
    assert torch.equal(mixed.columns, Fixed.columns) and mixed.identity == "fixed|lookup0.4" and mixed.runs_model
    mixed.begin(text)
    tree = DraftTree()
    a = tree.add(16, ROOT, 0.5, 0.5)  # "… 8 4 16": the text went on with 32 once and 33 once
    b = tree.add(18, ROOT, 0.5, 0.5)  # "… 4 18": no n-gram ends in 18
    q = torch.softmax(mixed.propose([ROOT, a, b], tree), -1)  # (3, 20) over the even ids
    q_drafter = torch.softmax(Fixed().z, -1)
    assert torch.allclose(q[2], q_drafter, atol=1e-6)  # no match: the drafter's own q
    col = {int(t): i for i, t in enumerate(Fixed.columns)}
    assert torch.allclose(q[0], 0.6 * q_drafter + 0.4 * torch.eye(20)[col[16]], atol=1e-6)  # "8 4" -> 16 every time
    lookup_share = torch.zeros(20)
    lookup_share[col[32]] = 0.4 / 2  # 33 is outside the drafter's ids: its half of λ is left out, the row
    expected = 0.6 * q_drafter + lookup_share  # renormalised (only -inf cannot be proposed)
    assert torch.allclose(q[1], expected / expected.sum(), atol=1e-6)


def test_every_tree_on_a_mixed_drafter_equals_ar(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    head = head_of(target, tmp_path / "head", draft_vocab=48)
    for prompt in (PROMPT, [9, 9, 40, 2, 11, 30, 7]):
        ar = Session(target, ARMethod(), prompt, max_new_tokens=40).generate()
        for mix in (0.3, 1.0):
            for label, name, knobs in TREES:
                got = Session(target, build_method(name, **knobs), prompt, max_new_tokens=40,
                              draft=LookupMix(EagleDrafter(head, target), target.vocab_size, mix)).generate()
                assert got.output_ids == ar.output_ids, (label, mix)


def test_the_knob_wraps_a_drafter_from_the_registry_and_the_bench_and_bad_shares_are_refused(tmp_path):
    target = tiny_lm("llama", seed=0, num_hidden_layers=4)
    folder = str(write_tiny_head(target, tmp_path / "head"))
    made = drafter_factory("eagle3", target, folder, options={"lookup_mix": 0.5})()
    assert isinstance(made, LookupMix) and isinstance(made.inner, EagleDrafter) and made.mix == 0.5
    assert not isinstance(drafter_factory("eagle3", target, folder)(), LookupMix)  # 0 = off
    assert not isinstance(drafter_factory("lookup", target, options={"lookup_mix": 0.5})(), LookupMix)  # not its knob
    _, name, key, _ = parse_spec("talon@eagle3:N=8:lookup_mix=0.25", {}, "eagle3")
    assert name == "talon" and drafter_of(key) == ("eagle3", {"head_int8": "auto", "lookup_mix": 0.25})
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError) as err:
            drafter_factory("eagle3", target, folder, options={"lookup_mix": bad})
        assert "λ_lookup" in str(err.value) and "\n" not in str(err.value)


def test_the_page_mixes_lookup_in_when_asked_and_refuses_a_bad_share_in_one_line():
    import gradio as gr
    from tests.handler_helpers import step
    out = step(None, drafter="eagle3", lookup_mix=0.5)
    assert dict(out["run"].config.knobs)["lookup_mix"] == 0.5 and out["run"].traces[0].tau >= 1
    with pytest.raises(gr.Error, match="λ_lookup") as exc:
        step(out["run"], drafter="eagle3", lookup_mix=1.5)
    assert "\n" not in str(exc.value) and "Traceback" not in str(exc.value)
    again = step(out["run"], drafter="eagle3", lookup_mix=0.5)  # the same settings continue the same run
    assert len(again["run"].traces) == 2
