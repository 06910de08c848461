"""Every script is run as a file (`python scripts/x.py`, as their docstrings show), where Python puts scripts/ and
not the repository root on sys.path: a script that imports the project's packages must put the root there first.
scripts/head_agreement.py once did not, and its documented command failed on import."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"cli", "core", "ui", "viz", "tests"}


def inserts_root(node: ast.stmt) -> bool:
    return "sys.path.insert" in ast.unparse(node) or "sys.path[:0]" in ast.unparse(node)


def imports_ours(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] in OURS and node.level == 0
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] in OURS for a in node.names)


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "scripts").glob("*.py")))
def test_the_root_is_on_the_path_before_the_projects_imports(script):
    body = ast.parse((ROOT / "scripts" / script).read_text()).body
    first_ours = next((i for i, n in enumerate(body) if imports_ours(n)), None)
    if first_ours is not None:
        assert any(inserts_root(n) for n in body[:first_ours]), f"{script} imports the project before sys.path has it"
