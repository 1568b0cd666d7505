"""The package's layers (DESIGN.md "Layers"): imports flow downward only, and no module cycles.

Imports inside functions count, since they run; so do imports under ``if TYPE_CHECKING:`` (a
type-only import ties two modules as surely as a running one: the floors hold for them too,
and the few type-only cycles left are listed below as debts, to shrink, never to grow).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import actors

ROOT = Path(actors.__file__).parent

# Floor of each package (or top-level module); a module may import its own floor or lower.
FLOORS: dict[str, int] = {
    "exceptions": 0,
    "_logging": 0,
    "_dependency_logs": 0,
    "_safe": 0,
    "_checks": 0,
    "_text": 0,
    "_files": 0,
    "context": 1,
    "models": 2,
    "store": 2,
    "loop": 3,
    "host": 4,  # what every host shares: the cell, nodes, refs, restore, streams, children
    "runtime": 5,  # the pykka host
    "ray": 6,  # agent hosts that each run the pykka host
    "sim": 5,  # a host on a virtual clock, on the shared layer
    "testing": 6,
    "mcp": 6,
    "a2a": 6,  # a remote A2A agent as a subagent (an integration, as mcp)
    "__init__": 6,
    "trace": 7,
    "otel": 7,
    "serve": 7,  # HTTP serving, on the public API of the hosts
    "cli": 8,
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


# Type-only cycles still to pay (each pair: the type-only import, then the module it cycles
# with). The host layer (issue 24) takes them on; a new one fails the test.
TYPE_ONLY_DEBTS: set[tuple[str, str]] = {
    ("actors.host._observer", "actors.host._node"),
    ("actors.ray._remote_child", "actors.ray._peers"),
    ("actors.ray._peers", "actors.ray._server"),
}


def _runtime_imports(path: Path, modules: set[str], *, typing: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    if typing:  # the imports under TYPE_CHECKING only
        kept = skipped
        skipped = {id(n) for n in ast.walk(tree)} - kept
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


def _graph(*, typing: bool = False) -> dict[str, set[str]]:
    """Who imports whom at run time (``typing``: who imports whom for type checking only)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = _runtime_imports(path, set(modules), typing=typing)
        graph[name] = {m for m in deps if m in modules and m != name}
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for dep in graph[todo.pop()]:
            if dep == goal:
                return True
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return False


def test_every_package_has_a_floor() -> None:
    units = {_unit(name) for name in _graph()}
    assert units <= set(FLOORS) | {"__main__"}, sorted(units - set(FLOORS))


@pytest.mark.parametrize("typing", [False, True], ids=["running", "type-only"])
def test_imports_flow_downward_only(typing: bool) -> None:
    upward = []
    for name, deps in _graph(typing=typing).items():
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


def test_type_only_imports_close_no_new_cycle() -> None:
    running, typing = _graph(), _graph(typing=True)
    both = {name: running[name] | typing[name] for name in running}
    cycles = {
        (name, dep)
        for name, deps in typing.items()
        for dep in deps
        if dep not in running[name] and _reaches(both, dep, name)
    }
    assert cycles <= TYPE_ONLY_DEBTS, sorted(cycles - TYPE_ONLY_DEBTS)
    assert cycles >= TYPE_ONLY_DEBTS, f"paid, take off the list: {sorted(TYPE_ONLY_DEBTS - cycles)}"


def test_hosts_use_the_shared_layer_by_its_public_names() -> None:
    """sim, ray and otel build on `actors.host` and `actors.runtime` by their public names."""
    private = []
    for kind in (False, True):
        for name, deps in _graph(typing=kind).items():
            if _unit(name) not in ("sim", "ray", "otel"):
                continue
            private.extend(
                f"{name} -> {dep}"
                for dep in deps
                if _unit(dep) in ("host", "runtime") and "._" in dep.removeprefix("actors.")
            )
    assert not private, "\n".join(sorted(set(private)))
