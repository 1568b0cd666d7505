from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import actors
import actors.exceptions

PACKAGE = Path(actors.__file__).parent
PUBLIC_MODULES = [actors, actors.exceptions]

# Classes that a private module lists in its __all__ but that are deliberately not public.
# Each entry needs a reason; the owner of the module decides (export it, or drop it from the
# module's __all__ and remove it here).
NOT_REEXPORTED = {
    "actors._logging.LazyLogger": "the library's own logger; users see configure_logging",
    "actors.loop._loop.AgentLoop": "the agent loop's state machine; used by the runtimes",
    "actors.host._node.AgentNode": "the runtime's node of the tree; users see TreeNode",
    "actors.host._stream.TreeStream": "the queue behind run_stream; users iterate it",
    "actors.host._tombstone.Tombstone": "what a tree keeps of an ended agent; see TreeNode",
    "actors.loop._toolset_host.ToolsetHost": "the hosts' registry of toolset views (runtime seam)",
    "actors.loop._budget.Ledger": "a tree's budget ledger; the hosts make and restore it",
    "actors.loop._budget.Amount": "an amount of a ledger (events hold it as plain JSON)",
    "actors.loop._budget.BudgetBook": "what a ledger asks of a store for a shared budget",
}

CONTEXT_MODULES = sorted(p.stem for p in (PACKAGE / "context").glob("_*.py"))


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_all_is_sorted_and_unique(module: ModuleType) -> None:
    names = list(module.__all__)
    assert names == sorted(names, key=str.lower)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_every_listed_name_resolves(module: ModuleType) -> None:
    for name in module.__all__:
        assert getattr(module, name, None) is not None, f"{module.__name__}.{name} is missing"
    namespace: dict[str, object] = {}
    exec(f"from {module.__name__} import *", namespace)
    assert set(module.__all__) <= set(namespace)


def test_the_context_core_is_public() -> None:
    required = {
        "AgentContext",
        "AssistantMessage",
        "ContextUpdate",
        "RunContext",
        "SystemMessage",
        "ToolCall",
        "ToolResultMessage",
        "Usage",
        "UserMessage",
    }
    assert required <= set(actors.__all__)


def _public_classes(module: ModuleType) -> list[tuple[str, type]]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name in vars(module) if not name.startswith("_")]
    return [
        (name, value)
        for name in names
        if inspect.isclass(value := getattr(module, name)) and value.__module__ == module.__name__
    ]


def test_every_public_class_of_a_re_exporting_module_is_exported() -> None:
    sources = {
        getattr(actors, name).__module__
        for name in actors.__all__
        if "._" in str(getattr(getattr(actors, name), "__module__", ""))
    }
    missing = [
        f"{module_name}.{name}"
        for module_name in sorted(sources)
        for name, _ in _public_classes(sys.modules[module_name])
        if name not in actors.__all__ and f"{module_name}.{name}" not in NOT_REEXPORTED
    ]
    assert missing == [], "export these from actors (or make them private)"


def test_every_exception_class_is_listed() -> None:
    defined = {
        name
        for name, value in vars(actors.exceptions).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == "actors.exceptions"
    }
    assert defined == set(actors.exceptions.__all__)
    for name in defined:
        assert issubclass(getattr(actors.exceptions, name), actors.exceptions.ActorsError)


def _docstring_tree() -> dict[str, str | None]:
    """Each class of the tree drawn in the module docstring, mapped to its drawn parent."""
    doc = actors.exceptions.__doc__ or ""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        match = re.match(r"^(\s*(?:[│ ]\s*)*(?:[├└]── )?)([A-Z]\w+)\b", line)
        if not match or not (match.group(1).strip() or line.strip() == "ActorsError"):
            continue
        depth, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def test_the_docstring_tree_names_every_exception_with_its_real_parent() -> None:
    tree = _docstring_tree()
    assert set(tree) == set(actors.exceptions.__all__)
    for name, parent in tree.items():
        cls = getattr(actors.exceptions, name)
        if parent is None:
            assert cls is actors.exceptions.ActorsError
        else:
            assert getattr(actors.exceptions, parent) in cls.__bases__, (name, parent)


def test_caller_mistakes_are_value_errors() -> None:
    assert issubclass(actors.exceptions.UserError, ValueError)
    assert issubclass(actors.exceptions.InvalidUpdateError, actors.exceptions.UserError)
    assert issubclass(actors.exceptions.SerializationError, actors.exceptions.UserError)


@pytest.mark.parametrize("module", CONTEXT_MODULES)
def test_the_context_layer_imports_nothing_else_of_actors(module: str) -> None:
    tree = ast.parse((PACKAGE / "context" / f"{module}.py").read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("actors")
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("actors")
    }
    # The floor below: the exception tree, the lazy logger and the text rule (which the
    # reports of users' exceptions, on the same floor, follow too).
    below = {"actors.exceptions", "actors._logging", "actors._text"}
    outside = {n for n in imported if n not in below and not n.startswith("actors.context.")}
    assert outside == set()


def test_the_package_is_typed() -> None:
    assert (PACKAGE / "py.typed").exists()


def test_importing_does_not_configure_logging() -> None:
    code = (
        "import actors, structlog, logging; print(structlog.is_configured(), logging.root.handlers)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False []"
