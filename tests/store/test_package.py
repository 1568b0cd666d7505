from __future__ import annotations

import ast
import doctest
import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import actors.store
import actors.store._memory
import actors.store._postgres
import actors.store._protocol
import actors.store._records
import actors.store._sqlite
from actors.store import MemoryStore, PostgresStore, SessionStore, SQLiteStore

STORE = Path(actors.store.__file__).parent
DOCS = STORE.parents[1] / "docs" / "persistence.md"
# The layers below the store: the context core, the exceptions and the lazy logger.
ALLOWED = {"actors.exceptions", "actors._logging", "actors._dependency_logs", "actors._text"}


def test_all_is_sorted_and_complete() -> None:
    names = list(actors.store.__all__)
    assert names == sorted(names, key=str.lower)
    private = [
        actors.store._memory,
        actors.store._postgres,
        actors.store._records,
        actors.store._sqlite,
    ]
    defined = {name for module in private for name in module.__all__}
    assert set(names) == defined | {"SessionStore", "BudgetStore", "BudgetTotals"}
    for name in names:
        assert getattr(actors.store, name) is not None


def test_stores_are_session_stores() -> None:
    assert issubclass(SQLiteStore, SessionStore)
    assert issubclass(MemoryStore, SessionStore)
    assert issubclass(PostgresStore, SessionStore)
    for store in (MemoryStore, PostgresStore, SQLiteStore):
        assert not inspect.isabstract(store)
        assert {"acquire", "release"} <= set(vars(store))  # not the protocol's empty bodies


@pytest.mark.parametrize("path", sorted(STORE.glob("*.py")), ids=lambda p: p.name)
def test_the_store_imports_only_lower_layers(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("actors")
    }
    outside = {
        name
        for name in imported - ALLOWED
        if not name.startswith(("actors.store", "actors.context."))
    }
    assert outside == set()


def test_importing_the_store_does_not_import_pytest() -> None:
    code = "import sys, actors.store; print('pytest' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "module",
    [actors.store, actors.store._memory, actors.store._protocol, actors.store._sqlite],
    ids=lambda module: module.__name__,
)
def test_docstring_examples(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_the_persistence_page_examples() -> None:
    result = doctest.testfile(str(DOCS), module_relative=False)
    assert result.attempted > 0
    assert result.failed == 0
