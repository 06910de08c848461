"""The engine stays readable and per-session: a package per concept, each opening with a reading map, at most 20
modules left at core's top; no function in core/ over 50 lines, no class over 150, no module over 400; and auto
keeps nothing at module level that one app session could leave for the next."""
import ast
from pathlib import Path

import core.auto.budget
import core.auto.predict
import core.auto.replay
import core.specbound.method
import core.trees.method

CORE = Path(__file__).resolve().parent.parent / "core"


def test_core_is_a_package_per_concept_each_opening_with_a_reading_map():
    top = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 20, top
    packages = sorted(p for p in CORE.iterdir() if (p / "__init__.py").exists())
    assert len(packages) >= 5, packages
    for package in packages:
        tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree) or ""
        assert "Entry point" in doc, package.name  # its entry point, then its files in reading order
        assert all(isinstance(node, ast.Expr) for node in tree.body), package.name  # it re-exports nothing
        files = sorted(f.name for f in package.glob("*.py") if f.name != "__init__.py")
        assert [f for f in files if f not in doc] == [], package.name  # every file has its line in the map


def test_core_functions_classes_and_modules_are_small():
    too_long = []
    for path in sorted(CORE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        assert len(source.splitlines()) <= 400, path.relative_to(CORE)
        for node in ast.walk(ast.parse(source)):
            limit = 50 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else 150 \
                if isinstance(node, ast.ClassDef) else None
            if limit and node.end_lineno - node.lineno + 1 > limit:
                too_long.append(f"{path.relative_to(CORE)}:{node.name}")
    assert not too_long


def test_auto_and_specbound_keep_no_mutable_state_at_module_level():
    for module in (core.auto.budget, core.auto.predict, core.auto.replay, core.specbound.method, core.trees.method):
        shared = [name for name, value in vars(module).items()
                  if not name.startswith("__") and isinstance(value, (dict, list, set))]
        assert not shared, (module.__name__, shared)
