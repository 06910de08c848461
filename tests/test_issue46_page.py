"""Issue 46, items 2, 3, 7, 8, 9 and 13: what the page says and draws is true and bounded. No entity shows
literally in a picture (Plotly decodes only a few), the colours the text names are the ones drawn, a speed is
claimed only for this model on this machine, the page names the model it runs and never announces a preview that
failed, a drafter that cannot run says why in a line without any server path, and a 1024-node chain draws a
figure of bounded height."""
from __future__ import annotations

import colorsys
import html
import json
import re
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest

from core.model.cost_cache import fingerprint
from core.trace import TargetChoice
from tests.viz_fixtures import chain_of, specbound_example, talon_example
from ui.knobs import SPECBOUND_KNOBS, TALON_KNOBS
from viz.palette import STATUS_COLORS
from viz.tree_fig import MAX_HEIGHT_PX, natural_height, tree_figure
from viz.walk import stages
from viz.walk_view import stage_figure, stage_html

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ['"', "'", "<b>x</b>", "a & b", 'say "hi"']
# plotly.js's svg_text_utils: the named entities it turns back into characters; numeric ones it always does
PLOTLY_NAMED = {"mu": "μ", "amp": "&", "lt": "<", "gt": ">", "nbsp": "\xa0", "times": "×", "plusmn": "±", "deg": "°"}
ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")


def plotly_shows(text: str) -> str:
    """What Plotly draws for a label: its tags dropped and the entities it knows decoded (others stay literal)."""
    def one(m: re.Match) -> str:
        name = m.group(1)
        if name.startswith("#x"):
            return chr(int(name[2:], 16))
        if name.startswith("#"):
            return chr(int(name[1:]))
        return PLOTLY_NAMED.get(name, m.group(0))
    return ENTITY.sub(one, re.sub(r"<[^<>]*>", "", text))


def strings(value) -> list[str]:
    """Every string in a figure's JSON (texts, hovers, ticks, annotations, titles, names)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    return []


def hostile_trace():
    t = talon_example()
    for node, text in zip(t.nodes, HOSTILE):
        node.text = text
    t.pruned[0].text = HOSTILE[-1]
    t.choices[-1] = TargetChoice(t.choices[-1].at, 9, '"q"', 0.8)
    return t


def figure_texts(fig) -> list[str]:
    return strings(fig.to_plotly_json())


# item 2 -------------------------------------------------------------------------------------------------------

def test_no_entity_shows_literally_in_the_tree_or_any_walk_picture():
    t = hostile_trace()
    figs = [tree_figure(t)] + [stage_figure(t, t, s, 'the "walk" · step 1') for s in stages(t, t)]
    sb = specbound_example()
    sb.nodes[0].text = '"'
    sb.exits[0].top_texts[0] = '<i>"</i>'
    figs += [stage_figure(sb, None, s, "x") for s in stages(sb)]
    shown = [plotly_shows(s) for fig in figs for s in figure_texts(fig)]
    assert not [s for s in shown if ENTITY.search(s)], "an entity Plotly does not decode"
    assert any(s == '"' for s in shown)  # the quote token's own label, drawn as a quote
    assert any('"q"' in s for s in shown)  # the bonus token's hover
    raw = [s for fig in figs for s in figure_texts(fig)]
    assert not [s for s in raw if "<b>x</b>" in s or "<i>" in s], "a token's text became markup"


def test_the_walks_sentences_are_escaped_once():
    t = hostile_trace()
    all_stages = stages(t, t)
    for at in range(len(all_stages)):
        text = html.unescape(re.sub(r"<[^>]+>", "", stage_html(all_stages, at, 'the "walk"')))
        assert not ENTITY.search(text), (all_stages[at].name, text)


# item 3 -------------------------------------------------------------------------------------------------------

def hue_name(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    h, _, s = colorsys.rgb_to_hls(r, g, b)
    if s < 0.1:
        return "grey"
    deg = h * 360
    return "vermillion" if deg < 32 else "gold" if deg < 55 else "blue" if 180 <= deg < 250 else f"{deg:.0f}°"


def page_texts() -> dict[str, str]:
    from ui import learn
    from ui.view_specs import CAPTIONS
    texts = {"docs/app.md": (ROOT / "docs" / "app.md").read_text(encoding="utf-8"), "captions": " ".join(CAPTIONS.values())}
    texts.update({f"learn.{k}": v for k, v in vars(learn).items() if k.isupper() and isinstance(v, str)})
    return texts


def test_the_text_names_the_colours_the_tree_draws():
    drawn = {status: hue_name(STATUS_COLORS[status]) for status in ("accepted", "rejected", "unreached", "bonus")}
    assert drawn == {"accepted": "blue", "rejected": "vermillion", "unreached": "grey", "bonus": "gold"}
    wrong = re.compile(r"\b(green|red|orange)\b (nodes?|ones|dots?|crosses|circles?|rings?|star)|\bgreen\b", re.I)
    for name, text in page_texts().items():
        assert not wrong.search(text), (name, wrong.search(text).group(0))
    docs = page_texts()["docs/app.md"]
    tree = docs[docs.index("**The draft tree**"):docs.index("**Budget meter")]
    for colour in drawn.values():
        assert colour in tree.lower(), colour


# item 7 -------------------------------------------------------------------------------------------------------

DEFAULTS = {k.name: k.default for k in TALON_KNOBS + SPECBOUND_KNOBS}


def bench_file(tmp_path, machine: str | None = None, **entry_extra) -> Path:
    from ui.preset_line import method_knobs
    entry = {"preset": "paper", "knobs": method_knobs("specbound", DEFAULTS), "speedup": 0.893, "prompts": 3,
             "max_new_tokens": 32, "measured": "2026-12-03", **entry_extra}
    path = tmp_path / "view_speed.json"
    path.write_text(json.dumps({"machine": machine or fingerprint("cpu"), "views": {"specbound": [entry]}}))
    return path


def test_a_speed_is_claimed_only_for_this_model_on_this_machine(tmp_path):
    from ui.preset_line import running_html
    line = lambda path, **v: running_html("specbound", {**DEFAULTS, **v}, path=path)  # noqa: E731
    assert "0.89" not in line(bench_file(tmp_path))  # an entry that does not name its model claims nothing
    assert "0.89" not in line(bench_file(tmp_path, model="embedded"), target="smollm2")  # another model's
    other = line(bench_file(tmp_path, "Intel Xeon · 2 cpus (another VM)", model="embedded"), target="embedded")
    assert "0.89" not in other and "not this machine" not in other and "not measured" in other
    said = line(bench_file(tmp_path, model="embedded"), target="embedded")
    assert "<b>0.89×</b>" in said and "2026-12-03" in said and "3 prompts × 32 tokens" in said
    assert "scripts/view_speed.py" in said and html.escape(fingerprint("cpu"), quote=True) in said


def test_a_talon_speed_is_claimed_only_for_the_drafter_it_measured(tmp_path):
    from ui.preset_line import method_knobs, running_html
    entry = {"knobs": method_knobs("talon", DEFAULTS), "speedup": 1.5, "prompts": 3, "max_new_tokens": 32,
             "measured": "2026-12-03", "model": "embedded", "drafter": "lookup"}
    path = tmp_path / "view_speed.json"
    path.write_text(json.dumps({"machine": fingerprint("cpu"), "views": {"talon": [entry]}}))
    assert "1.50×" in running_html("talon", {**DEFAULTS, "target": "embedded", "drafter": "lookup"}, path=path)
    assert "1.50×" not in running_html("talon", {**DEFAULTS, "target": "embedded", "drafter": "model"}, path=path)


# item 8 -------------------------------------------------------------------------------------------------------

def test_the_intro_and_the_line_above_a_view_name_the_model_it_runs():
    from ui.learn import intro
    from ui.preset_line import running_html
    for model, name in (("smollm2", "SmolLM2"), ("Qwen/Qwen3-1.7B", "Qwen/Qwen3-1.7B")):
        for text in (intro(model), running_html("talon", {**DEFAULTS, "target": model})):
            assert name in text and "12 M" not in text and "Python library code" not in text, text
    assert "12 M" in intro("embedded") and "12 M" in running_html("talon", {**DEFAULTS, "target": ""})


def fake_preview(target: str):
    return SimpleNamespace(traces=[object()], config=SimpleNamespace(target=target))


def test_the_walk_invites_to_a_preview_only_when_there_is_one_and_names_its_model(monkeypatch):
    from ui import walk
    monkeypatch.setattr(walk.PREVIEW, "runs", {})
    for note in (walk.invite_html("talon"), walk.follow("talon", run=None, trace=None)["walk_note"]):
        assert "preview" not in note.lower() and "Press Step" in note
    monkeypatch.setattr(walk.PREVIEW, "runs", {"talon": fake_preview("smollm2")})
    assert "preview on SmolLM2-135M-Instruct" in walk.invite_html("talon")


def test_a_failed_preview_is_not_announced_on_page_load(monkeypatch):
    from ui import preview
    from ui.open_link import open_view
    from ui.view_specs import VIEWS
    monkeypatch.setattr(preview.PREVIEW, "runs", {})
    monkeypatch.setattr(preview.PREVIEW, "ready", __import__("threading").Event())
    preview.PREVIEW.ready.set()
    out = open_view(VIEWS["talon"], None)
    assert "preview" not in out["walk_note"].lower() and "Preview" not in out["stats"]


def test_one_views_failed_preview_leaves_the_others_labelled_as_a_preview(monkeypatch):
    from ui import preview

    class FakeRun:
        label = ""

        def __init__(self, cfg):
            self.config, self.traces = cfg, []

        @classmethod
        def start(cls, cfg):
            return cls(cfg)

        def step(self):
            if self.config.method == "specbound":
                raise RuntimeError("no exit heads in /srv/secret/models")
            self.traces.append(object())

        def shadow(self, *args):
            pass

        def forget(self):
            pass

    monkeypatch.setattr(preview, "Run", FakeRun)
    monkeypatch.setattr(preview, "warm_cost_curves", lambda: None)
    p = preview.Preview()
    p.compute()
    assert set(p.runs) == {"talon"} and p.runs["talon"].label == preview.LABEL and p.ready.is_set()
    assert "preview" in p.note(p.runs["talon"]).lower() and "could not" not in p.note(p.runs["talon"])


# item 9 -------------------------------------------------------------------------------------------------------

PATH = re.compile(r"(^|[\s'\"(])(/|[A-Za-z]:\\)\w")


def test_no_toast_holds_a_server_path():
    from ui.handlers import user_error
    for exc in (ValueError("cannot read '/work/main/.cache/models/smollm2/config.json': bad"),
                RuntimeError("boom in /usr/lib/python3/x.py"), gr.Error("file /tmp/abc/def.json is odd"),
                ValueError(r"cannot open C:\Users\me\x.json")):
        message = user_error(exc, "test").message
        assert not PATH.search(message) and "(a path on the server)" in message, message


def test_a_drafter_that_cannot_run_says_why_and_what_would_make_it_run():
    from core.model.loading import DEFAULT_DRAFT
    from ui.worker import drafter_refusal
    reason = (f"drafter 'model' cannot be used with this target: the draft '{DEFAULT_DRAFT}' and the target have "
              f"different tokenizers; pick a draft from the target's family")
    said = drafter_refusal("model", "smollm2", reason)
    assert not PATH.search(said) and said.count("cannot") == 1
    assert "SmolLM2-135M-Instruct" in said and "tokenizer" in said and "draft box" in said
    assert "lookup and self run on any target" in said


def test_stepping_the_real_model_with_the_model_drafter_is_refused_in_one_line():
    from ui.models import real_fetched
    if not real_fetched("smollm2"):
        pytest.skip("the real model was not fetched here (python -m cli.get_model smollm2)")
    from tests.handler_helpers import step
    with pytest.raises(gr.Error) as err:
        step(None, target="smollm2", drafter="model", max_new_tokens=4)
    message = err.value.message
    assert not PATH.search(message) and "\n" not in message
    assert "SmolLM2-135M-Instruct" in message and "tokenizer" in message and "to run it" in message


# item 13 ------------------------------------------------------------------------------------------------------

def drawn_points(fig) -> int:
    return sum(len(t.x) for t in fig.data if t.mode and "markers" in t.mode)


def test_a_1024_node_chain_draws_a_bounded_figure():
    t = chain_of(1024)
    fig = tree_figure(t)
    assert fig.layout.height <= MAX_HEIGHT_PX and natural_height(t) <= MAX_HEIGHT_PX
    assert drawn_points(fig) <= 40
    texts = [x for tr in fig.data for x in (tr.text or ()) if isinstance(x, str)]
    assert "t0" in texts and "t1023" in texts and "… 1011 more" in texts
    assert len([tr for tr in fig.data if tr.meta == "bonus"]) == 1
    for s in stages(t):
        pic = stage_figure(t, None, s, "x")
        assert pic.layout.height <= MAX_HEIGHT_PX and drawn_points(pic) <= 60, s.name


def test_a_long_chain_is_folded_around_where_its_accepted_path_ends():
    t = chain_of(1024)
    for i, n in enumerate(t.nodes):
        n.status = "accepted" if i < 500 else "rejected" if i == 500 else "unreached"
    t.accepted_path, t.choices = list(range(500)), [TargetChoice(499, 0, "z", 0.5)]
    fig = tree_figure(t)
    assert fig.layout.height <= MAX_HEIGHT_PX and drawn_points(fig) <= 40
    assert len([tr for tr in fig.data if tr.meta == "rejected"][0].x) == 1  # where the walk stopped is drawn
    assert len([tr for tr in fig.data if tr.meta == "bonus"]) == 1
    assert any("d=10…497" in tick for tick in fig.layout.yaxis.ticktext)
