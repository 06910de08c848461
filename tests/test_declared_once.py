"""Declare once, derive the rest. A TALON knob declared in core/knobs.py (and carried by the policy as a field)
reaches the CLI's flags, the page's sliders and their checks, the share link, the presets and each step's
trace with nothing else written; a drafter declared in core/drafter_registry.py's registry reaches the CLI's
choices, the page's radio, the link's check and a session. Both are built here from one declaration."""
import argparse
from dataclasses import dataclass, replace

import pytest

from core import drafter_registry, knobs
from core.drafters.lookup import LookupDrafter
from core.engine import Session
from core.trees.policies import TalonPolicy

FANOUT = knobs.Knob("fanout", "F (fan-out cap)", int, 0, "children kept per parent at most (0: no cap)", 0, 64,
                    ui_max=16, link="F")


@dataclass
class CappedTalon(TalonPolicy):
    """The one code change a new knob needs: the policy that uses it (here it only carries it)."""
    fanout: int = FANOUT.default


@pytest.fixture
def with_fanout(monkeypatch):
    import core.trees.method
    monkeypatch.setitem(knobs.METHOD_KNOBS, "talon", (*knobs.METHOD_KNOBS["talon"], FANOUT))
    monkeypatch.setitem(knobs.ALL_KNOBS, "fanout", FANOUT)
    monkeypatch.setattr(core.trees.method, "POLICIES", {**core.trees.method.POLICIES, "talon": CappedTalon})


def test_a_new_talon_knob_reaches_every_place_from_its_declaration(with_fanout, target, draft):
    from cli.common import add_common_args
    from core.drafters.draft_lm import ModelDrafter
    from core.methods import build_method
    ap = argparse.ArgumentParser()
    add_common_args(ap)
    assert ap.parse_args(["--prompts", "x", "--fanout", "3"]).fanout == 3  # the CLI flag
    assert FANOUT in knobs.page_knobs("talon")  # the page's slider, with its range and tooltip
    assert FANOUT.check(20, page=False) == 20
    with pytest.raises(ValueError, match="F \\(fan-out cap\\) must be between 0 and 16"):
        FANOUT.check(20, page=True)
    assert knobs.resolve("talon", {"preset": "embedded"})["fanout"] == 0  # presets keep its default
    trace = Session(target, build_method("talon", N=8, fanout=3), "def f(x):", max_new_tokens=4,
                    draft=ModelDrafter(draft)).step()
    assert trace.tree.knob("fanout") == 3  # recorded as data by every step
    with pytest.raises(ValueError, match="fan-out cap"):
        build_method("talon", fanout=99)  # checked by its declaration


def test_a_new_knob_gets_its_share_link_from_its_link_name():
    from ui import share
    k = replace(FANOUT, link="F")
    params = {kn.link: kn.name for kn in (*share.KNOBS.values(), k) if kn.link}
    assert params["F"] == "fanout" and params["N"] == "N" and params["mu"] == "mu"  # one source for every name
    assert all(share.PARAMS[p] == n for p, n in params.items() if n != "fanout")


def test_a_new_drafter_reaches_the_cli_the_page_and_a_session(monkeypatch, target):
    from ui import share, view_specs
    spec = drafter_registry.DrafterSpec("bigram", "bigram (pairs in the text)",
                                       lambda t, w, d, options: lambda: LookupDrafter(t.vocab_size, max_ngram=1,
                                                                                          name="bigram"))
    monkeypatch.setitem(drafter_registry.REGISTRY, "bigram", spec)
    assert "bigram" in drafter_registry.offered_drafters() and "bigram" in share.drafters()
    assert ("bigram (pairs in the text)", "bigram") in view_specs.drafter_choices()
    assert share.read_query({"drafter": "bigram"}).values["drafter"] == "bigram"
    make = drafter_registry.drafter_factory("bigram", target)
    from core.methods import build_method
    res = Session(target, build_method("talon", N=8), "x = x + 1\nx = x + 1\nx =", max_new_tokens=6,
                  draft=make()).generate()
    assert res.traces[0].drafter == "bigram" and len(res.output_ids) == 6


def test_a_session_takes_only_a_drafter(target, draft):
    from core.methods import build_method
    with pytest.raises(TypeError, match="must be a Drafter"):
        Session(target, build_method("chain"), "def f(x):", draft=draft)  # a bare LM: one way to make a drafter
