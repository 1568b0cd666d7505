"""actors.models as a package: its docs run, its docstring examples hold, its layers hold."""

from __future__ import annotations

import ast
import doctest
import importlib
import re
from pathlib import Path

import pytest

import actors.models

PACKAGE = Path(actors.models.__file__).parent
DOC = PACKAGE.parents[1] / "docs" / "providers.md"
MODULES = sorted(
    f"actors.models.{path.stem}" for path in PACKAGE.glob("*.py") if path.stem != "__init__"
)
# Models sit above the context core: they may use it, the model protocol and the exceptions,
# never the agent loop, the runtime or the store.
ALLOWED = {
    "actors.context._cancel",
    "actors._logging",
    "actors._text",
    "actors.context._messages",
    "actors.context._parts",
    "actors.context._message_view",
    "actors.context._quick_init",
    "actors.models._model",
    "actors.context._usage",
    "actors.exceptions",
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OLLAMA_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


def test_docs_providers_code_runs_in_order() -> None:
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 5
    namespace: dict[str, object] = {"__name__": "docs_providers"}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"{DOC.name} block {number}", "exec"), namespace)


@pytest.mark.parametrize("name", ["actors.models", *MODULES])
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failed == 0


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda path: path.name)
def test_models_import_only_lower_layers(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("actors")
    }
    imported |= {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("actors")
    }
    assert {name for name in imported - ALLOWED if not name.startswith("actors.models")} == set()


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda path: path.name)
def test_modules_stay_small(path: Path) -> None:
    assert len(path.read_text().splitlines()) < 400
