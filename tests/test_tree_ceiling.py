"""scripts/tree_ceiling.py: the levels a verified tree needs, and its table on the embedded pair."""
import importlib.util
import sys
from pathlib import Path

from core.trace import ROOT, DraftNode, StepTrace

HOME = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("tree_ceiling", HOME / "scripts" / "tree_ceiling.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_tree_is_priced_by_the_parents_at_each_level():
    ceiling = _script()
    # root -> a, b; a -> c, d; b -> e; c -> f: levels expand {root}, {a, b}, {c}
    shape = [(ROOT, 0), (ROOT, 0), (0, 1), (0, 1), (1, 1), (2, 2)]
    t = StepTrace(0, "static", 5, nodes=[DraftNode(7, "x", p, d, 0.5, 0.5) for p, d in shape], tau=3)
    assert ceiling.level_widths(t) == [1, 2, 1]

    class Cost:
        def t_verify(self, n):
            return 10.0 + n

        def t_draft(self, w):
            return 1.0 + w

    row = ceiling.Priced("r", cap=3)
    row.add([t], Cost())
    assert (row.tokens, row.levels, row.deepest_hits) == (3, 3, 1)
    assert row.ar_ms == 3 * 11 and row.verify_ms == 17 and row.draft_ms == 2 + 3 + 2
    assert row.one_level_ms == 2.0
    assert "| r | 1 | 3.00 | 6.0 | 3.00 (1 at 3) | 1.38× | 1.74× | 1.94× |" == row.line()


def test_the_table_has_a_row_per_budget_and_method(capsys):
    _script().main(["--model", str(HOME / "assets" / "models" / "target"), "--prompts",
                    str(HOME / "assets" / "prompts" / "heldout.jsonl"), "--limit", "2", "--max-new-tokens", "12",
                    "--N", "1,4", "--methods", "talon@eagle3:N=4"])
    out = capsys.readouterr().out
    lines = {line.split(" | ")[0]: line for line in out.splitlines() if line.startswith("| ")}
    assert set(lines) >= {"| best 1-node tree", "| best 4-node tree", "| talon@eagle3:N=4"}
    one = lines["| best 1-node tree"].split(" | ")
    assert one[3] == "1.0" and one[4] == "1.00" and float(one[2]) >= 1.0  # one node, one level a step
