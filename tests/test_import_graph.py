"""The project's import graph, read from the source: no import circle among its own modules (core, ui, viz, cli
and app), core's sub-packages importing each other in one direction, and each layer importing only those below
it (app -> ui -> viz -> core; cli -> core), core never gradio or plotly, viz never torch or gradio.

Every import statement counts wherever it is written: at the top, inside a function or under TYPE_CHECKING. A
lazy import hides a circle from Python, not from a reader."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "ui", "viz", "cli")


def project_files() -> dict[str, Path]:
    """Module name -> file, for app.py and every module of the project's packages."""
    files = {"app": ROOT / "app.py"}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


FILES = project_files()


def imported_names(module: str, path: Path) -> set[str]:
    """Every absolute name an import statement in the file names: the module, and module.name for `from`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's own package upwards
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def own_module(name: str) -> str | None:
    """The project module an imported name is or lies in (`core.knobs.Knob` -> core.knobs), else None."""
    while name and name not in FILES:
        name = name.rpartition(".")[0]
    return name or None


def module_graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in FILES.items():
        targets = {own_module(n) for n in imported_names(module, path)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


GRAPH = module_graph()


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle as [a, b, ..., a], or None: a depth-first walk that meets a module still on its path."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, stack = [start], [iter(sorted(graph.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                done.add(path.pop())
                stack.pop()
            elif nxt in path:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in done:
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def core_package(module: str) -> str:
    """core.trees.method -> core.trees; a module at core's top stands for itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "core" and len(parts) > 2 else module


def test_the_graph_is_read_from_every_project_file():
    assert {"app", "core.engine", "core.trees.method", "ui.handlers", "viz.tree_fig", "cli.bench"} <= set(FILES)
    assert "core.drafters.contract" in GRAPH["core.engine"]  # a top-level import
    assert "core.auto.budget" in GRAPH["core.engine"]  # under TYPE_CHECKING: it counts too


def test_the_cycle_finder_names_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_among_the_projects_modules():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_cores_packages_import_each_other_in_one_direction():
    packages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        if module.startswith("core."):
            packages.setdefault(core_package(module), set()).update(
                core_package(t) for t in targets if t.startswith("core.") and core_package(t) != core_package(module))
    cycle = find_cycle(packages)
    assert cycle is None, "core's packages import in a circle: " + " -> ".join(cycle)


@pytest.mark.parametrize("layer, below", [("core", ()), ("viz", ("core",)), ("ui", ("core", "viz")),
                                          ("cli", ("core",)), ("app", ("core", "ui", "viz"))])
def test_each_layer_imports_only_the_layers_below_it(layer, below):
    wrong = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if m.split(".")[0] == layer
                   for t in targets if t.split(".")[0] not in (layer, *below))
    assert not wrong


@pytest.mark.parametrize("layer, banned", [("core", ("gradio", "plotly")), ("viz", ("torch", "gradio"))])
def test_core_and_viz_keep_off_the_libraries_above_them(layer, banned):
    wrong = sorted(f"{m} imports {n}" for m, path in FILES.items() if m.split(".")[0] == layer
                   for n in imported_names(m, path) if n.split(".")[0] in banned)
    assert not wrong
