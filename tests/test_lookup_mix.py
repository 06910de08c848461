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
from core.drafters.lookup import LookupDrafter
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
    """A drafter whose rows are fixed logits over 8 columns (a reduced vocabulary's ids 0, 2, …, 14)."""
    name = "fixed"
    columns = torch.arange(0, 16, 2)

    def __init__(self) -> None:
        self.z = torch.linspace(-1.0, 1.0, 8)

    def propose(self, frontier, tree):
        return self.z.expand(len(frontier), -1).clone()  # (F, 8)

    def begin(self, ids):
        pass

    def prefill(self, ids, feats, max_len):
        pass

    def fresh(self):
        return Fixed()


def test_q_is_the_drafters_where_no_ngram_matched_and_the_mixture_where_one_did():
    V = 40
    mixed = LookupMix(Fixed(), V, 0.4)
    assert mixed.columns is None and mixed.identity == "fixed|lookup0.4" and mixed.runs_model
    mixed.begin(PROMPT)
    tree = DraftTree()
    a = tree.add(33, ROOT, 0.5, 0.5)  # "… 5 17" -> 33: the text followed "17" (and "5 17") with 33 twice
    b = tree.add(19, ROOT, 0.5, 0.5)  # "… 17 19": no n-gram ends in 19
    q = torch.softmax(mixed.propose([ROOT, a, b], tree), -1)  # (3, V)
    q_drafter = torch.zeros(V).index_copy_(0, Fixed.columns, torch.softmax(Fixed().z, -1))
    assert torch.allclose(q[2], q_drafter, atol=1e-6)  # no match: the drafter's own q, over V
    lookup = LookupDrafter(V)
    lookup.begin(PROMPT)
    for row, node in ((0, ROOT), (1, a)):
        q_lookup = torch.softmax(lookup.propose([node], tree)[0], -1)
        assert torch.allclose(q[row], 0.6 * q_drafter + 0.4 * q_lookup, atol=1e-6)
    assert float(q[0, 33]) == pytest.approx(0.4)  # 33 is outside the drafter's columns: lookup alone proposes it
    assert float(q[1, 8]) > 0.4  # after "17 33" the text went on with 8 every time


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
