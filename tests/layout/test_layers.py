"""The package's layers (DESIGN.md "Layers"): imports flow downward only, and no module cycles.

Imports under ``if TYPE_CHECKING:`` are left out (they never run); imports inside functions
count, since they run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import actors

ROOT = Path(actors.__file__).parent

# Floor of each package (or top-level module); a module may import its own floor or lower.
FLOORS: dict[str, int] = {
    "exceptions": 0,
    "_logging": 0,
    "_safe": 0,
    "_checks": 0,
    "context": 1,
    "models": 2,
    "store": 2,
    "loop": 3,
    "host": 4,  # what hosts share (for now its conformance suite), under the hosts
    "runtime": 4,
    "ray": 5,
    "sim": 4,  # a host, like the runtime it builds on
    "testing": 5,
    "mcp": 5,
    "a2a": 5,  # a remote A2A agent as a subagent (an integration, as mcp)
    "__init__": 5,
    "trace": 6,
    "otel": 6,
    "serve": 6,  # HTTP serving, on the public API of the hosts
    "cli": 7,
}


def _unit(module: str) -> str:
    """The package (or top-level module) a dotted ``actors.*`` module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "actors" or node.module.startswith("actors."):
                for alias in node.names:
                    # ``from actors.cli import _demo`` depends on the submodule only
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("actors."))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = _runtime_imports(path, set(modules))
        graph[name] = {m for m in deps if m in modules and m != name}
    return graph


def test_every_package_has_a_floor() -> None:
    units = {_unit(name) for name in _graph()}
    assert units <= set(FLOORS) | {"__main__"}, sorted(units - set(FLOORS))


def test_imports_flow_downward_only() -> None:
    upward = []
    for name, deps in _graph().items():
        floor = FLOORS.get(_unit(name), 99)
        for dep in deps:
            if FLOORS.get(_unit(dep), 99) > floor:
                upward.append(f"{name} -> {dep}")
    assert not upward, "\n".join(sorted(upward))


def test_no_import_cycles_between_modules() -> None:
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)
