"""The engine stays readable and per-session: no function in core/ over 50 lines, no class over 150, no
module over 400; and auto keeps nothing at module level that one app session could leave for the next."""
import ast
from pathlib import Path

import core.auto_budget
import core.auto_predict
import core.auto_replay
import core.specbound
import core.tree_method

CORE = Path(__file__).resolve().parent.parent / "core"


def test_core_functions_classes_and_modules_are_small():
    too_long = []
    for path in sorted(CORE.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        assert len(source.splitlines()) <= 400, path.name
        for node in ast.walk(ast.parse(source)):
            limit = 50 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else 150 \
                if isinstance(node, ast.ClassDef) else None
            if limit and node.end_lineno - node.lineno + 1 > limit:
                too_long.append(f"{path.name}:{node.name}")
    assert not too_long


def test_auto_and_specbound_keep_no_mutable_state_at_module_level():
    for module in (core.auto_budget, core.auto_predict, core.auto_replay, core.specbound, core.tree_method):
        shared = [name for name, value in vars(module).items()
                  if not name.startswith("__") and isinstance(value, (dict, list, set))]
        assert not shared, (module.__name__, shared)
