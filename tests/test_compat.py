"""The compatibility readout: acceptance by draft position over the steps whose tree reached it, the draft
vocabulary's coverage of the committed text, the warning for an implausibly low position-0 acceptance, and
where the CLI shows it (generate's stderr line naming the head, bench's columns)."""
import json

import pytest

from cli import bench, generate
from core.eagle3.readout import WARNING, PositionTally, compat_readout, readout
from core.trace import ROOT, DraftNode, StepTrace

HEAD = {"dialect": "SpecForge", "taps": [2, 6, 9], "tap_rule": "eagle_config+1", "draft_vocab": 4}


def step(depths: list[int], parents: list[int], accepted: int, committed: list[int]) -> StepTrace:
    """A step whose tree has nodes at `depths` (with `parents`), whose path accepted `accepted` nodes."""
    nodes = [DraftNode(token_id=0, text="", parent=p, depth=d, q=0.5, score=0.5) for d, p in zip(depths, parents)]
    path, at = [], ROOT
    for _ in range(accepted):
        at = next(i for i, n in enumerate(nodes) if n.parent == at)
        path.append(at)
    return StepTrace(index=0, method="talon", context_len=1, nodes=nodes, accepted_path=path,
                     committed_ids=committed, tau=len(committed))


def test_acceptance_by_position_counts_only_the_steps_whose_tree_reached_it():
    traces = [step([0, 0, 1, 2], [ROOT, ROOT, 0, 2], 3, [1, 2, 3, 4]),  # reached 0, 1, 2; accepted all three
              step([0, 1], [ROOT, 0], 1, [1, 5]),  # reached 0, 1; accepted 0 only
              step([0], [ROOT], 0, [9]),  # reached 0; accepted nothing
              StepTrace(index=3, method="talon", context_len=9, committed_ids=[7])]  # drafted nothing
    r = compat_readout(traces, HEAD, draft_vocab={1, 2, 3, 4})
    assert r.steps == 3 and r.reached == [3, 2, 1]
    assert r.acceptance == pytest.approx([2 / 3, 1 / 2, 1.0])
    assert r.coverage == pytest.approx(5 / 8)  # committed 1 2 3 4 1 5 9 7: five of eight in the vocabulary
    assert r.warning is None and r.head == HEAD
    assert "0: 67% of 3" in r.text() and "62% of the committed text" in r.text()


def test_the_warning_needs_a_head_twenty_steps_and_position_0_below_30_percent():
    bad = [step([0], [ROOT], 0, [1])] * 15 + [step([0], [ROOT], 1, [1, 1])] * 5  # 25% over 20 steps
    assert readout(_tally(bad), HEAD).warning == WARNING
    assert readout(_tally(bad[:19]), HEAD).warning is None  # too few steps to say
    assert readout(_tally(bad), None).warning is None  # not a head (a draft LM, lookup)
    still_low = bad + [step([0], [ROOT], 1, [1, 1])]  # 6 of 21: 28.6%
    assert readout(_tally(still_low), HEAD).warning == WARNING
    assert readout(_tally(bad[:14] + [step([0], [ROOT], 1, [1, 1])] * 6), HEAD).warning is None  # 30%


def _tally(traces) -> PositionTally:
    t = PositionTally()
    t.add(traces)
    return t


def test_a_tally_adds_runs_and_knows_when_no_vocabulary_was_given():
    t = PositionTally()
    t.add([step([0, 1], [ROOT, 0], 2, [1, 2, 3])])
    assert readout(t).coverage is None
    t.add([step([0], [ROOT], 0, [4])], draft_vocab={1})
    assert readout(t).reached == [2, 1] and readout(t).acceptance == [0.5, 1.0]
    t.add([step([0], [ROOT], 0, [4, 4])], draft_vocab={4})
    assert readout(t).coverage == pytest.approx(2 / 3)  # over the 3 tokens counted with a vocabulary, not all 6


def test_a_position_counts_only_the_steps_whose_target_got_to_it():
    """Issue 34, item 9: 28 steps drafted positions 0 and 1 and accepted nothing at 0: position 1 was judged by
    no step, so the readout does not report it as "0% of 28"."""
    traces = [step([0, 1], [ROOT, 0], 0, [3])] * 28
    r = compat_readout(traces, HEAD, draft_vocab={3})
    assert r.reached == [28] and r.acceptance == [0.0] and r.drafted == [28, 28]
    mixed = traces[:2] + [step([0, 1, 2], [ROOT, 0, 1], 1, [1, 2])]  # one step gets past position 0
    m = compat_readout(mixed, HEAD)
    assert m.reached == [3, 1] and m.acceptance == pytest.approx([1 / 3, 0.0]) and m.drafted == [3, 3, 1]
    from viz.html import compat_html
    page = compat_html(r)
    assert "of 28" in page and "d=1: 0%" not in page and "d=1–1: drafted, but no step" in page


def test_coverage_is_shown_for_a_head_with_d2t_live_and_imported(tmp_path):
    """Issue 34, item 9: the embedded head drafts over 4096 of 8192 ids (d2t): its run's readout has the
    coverage, and so does the same run exported and imported (the vocabulary itself is not in the file)."""
    from tests.handler_helpers import step as talon_step
    from ui.importer import import_trace
    from viz.html import compat_html
    run = talon_step(None, drafter="eagle3")["run"]
    live = run.readout()
    assert live.head["draft_vocab"] < live.head["vocab"] and live.coverage is not None
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run.export()))
    imported = import_trace(path, "talon").readout()
    assert imported.coverage == pytest.approx(live.coverage) and imported.head["dialect"] == "SafeAILab"
    assert "of the committed text" in compat_html(imported)


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "f", "prompt": "def add(a, b):"}) + "\n" + json.dumps({"prompt": "import os"}) + "\n")
    return path


def test_generate_names_the_head_on_stderr(prompts, capsys):
    generate.main(["--method", "talon", "--drafter", "eagle3", "--prompts", str(prompts), "--max-new-tokens", "4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["drafter eagle3: SafeAILab layout; taps 2,6,9 (default); draft vocab 4096 of 8192; 1 layer; trained "
                   "here on the embedded target's training split (Python stdlib code); held-out agreement by depth 71%, "
                   "70%, 68%"]


def test_bench_shows_the_readout_as_columns(prompts, capsys):
    bench.main(["--prompts", str(prompts), "--methods", "ar,talon@eagle3:N=8,chain@lookup", "--max-new-tokens", "8",
                "--limit", "2", "--json"])
    rows = {r["label"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    head = rows["talon@eagle3:N=8"]
    assert head["head"]["dialect"] == "SafeAILab" and head["head"]["taps"] == [2, 6, 9]
    assert head["reached_by_position"][0] > 0 and 0 <= head["acceptance_by_position"][0] <= 1
    assert 0 < head["vocab_coverage"] <= 1 and head["compat_warning"] is None
    assert rows["chain@lookup"]["head"] is None and rows["ar"]["reached_by_position"] == []
    bench.main(["--prompts", str(prompts), "--methods", "ar,talon@eagle3:N=8", "--max-new-tokens", "8", "--limit", "1"])
    text = capsys.readouterr().out
    assert "### Compatibility readout" in text and "| talon@eagle3:N=8 |" in text and "SafeAILab, taps 2,6,9" in text
