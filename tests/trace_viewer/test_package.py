"""``actors.trace`` as a package: its public face, its layer, its viewer files, its example."""

from __future__ import annotations

import ast
import doctest
import tomllib
from pathlib import Path

import pytest

import actors.trace
import actors.trace._extract
import actors.trace._model
import actors.trace._render

TRACE = Path(actors.trace.__file__).parent
# The trace reads stored sessions through the public API only: it sits above the store. (It
# writes its page as every writer of the library does, whole or not at all: `actors._files`.)
ALLOWED = {"actors", "actors.store", "actors.exceptions", "actors._files"}


def test_all_is_sorted_and_complete() -> None:
    names = list(actors.trace.__all__)
    assert names == sorted(names, key=str.lower)
    private = [actors.trace._extract, actors.trace._model, actors.trace._render]
    assert set(names) == {name for module in private for name in module.__all__}
    for name in names:
        assert getattr(actors.trace, name) is not None


@pytest.mark.parametrize("path", sorted(TRACE.glob("*.py")), ids=lambda p: p.name)
def test_the_trace_imports_only_public_modules_below_it(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("actors")
    }
    assert {name for name in imported - ALLOWED if not name.startswith("actors.trace")} == set()


def test_the_viewer_files_ship_with_the_package() -> None:
    # Package data is listed file by file in pyproject.toml: a new viewer file must be too,
    # or installs other than editable ones render pages without it.
    pyproject = tomllib.loads((TRACE.parents[1] / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["package-data"]["actors.trace"])
    present = {p.name for p in TRACE.iterdir() if p.is_file() and p.suffix != ".py"}
    assert present == listed == {"viewer.html", "viewer.css", "viewer.js"}


def test_docstring_example() -> None:
    result = doctest.testmod(actors.trace)
    assert result.attempted > 0
    assert result.failed == 0
