"""The self drafter and the per-layer heads on the page: talon@self steps, a bad ℓ_self is one line and keeps the
session, and the SpecBound view names the heads it exits through with each layer's agreement."""
import html

import gradio as gr
import pytest

from tests.handler_helpers import sb_step, step


def test_a_talon_step_drafts_with_the_targets_own_layers():
    out = step(None, drafter="self", self_layer=3)
    trace = out["run"].traces[0]
    assert trace.drafter == "self" and trace.tau >= 1 and out["run"].config.drafter == "self"
    assert dict(out["run"].config.knobs)["self_layer"] == 3


@pytest.mark.parametrize("bad", [0, 12, 2.5])
def test_a_bad_self_layer_is_one_line_naming_the_range_and_the_session_survives(bad):
    first = step(None, drafter="self", self_layer=2)
    with pytest.raises(gr.Error, match=r"from 1 to L − 1 = 11") as exc:
        step(first["run"], drafter="self", self_layer=bad)
    assert "\n" not in str(exc.value) and "Traceback" not in str(exc.value)
    again = step(first["run"], drafter="self", self_layer=2)  # the same settings continue the same run
    assert len(again["run"].traces) == 2


def test_self_layer_is_ignored_for_other_drafters():
    out = step(None, drafter="lookup", self_layer=99)
    assert "self_layer" not in dict(out["run"].config.knobs)


def test_the_specbound_view_names_its_heads_and_their_agreement():
    why = html.unescape(sb_step(None)["why"])
    assert "a light LM head of its own per layer" in why and "ℓ1 " in why and "ℓ11 " in why
