"""docs/ray.md and RayRuntime's docstring run, on the session's cluster."""

from __future__ import annotations

import doctest
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from test_docs_examples import python_blocks

import actors.ray._runtime

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ray.md"


def test_the_ray_page_runs(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray import cloudpickle

    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("docs_ray")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # The page's functions live in no module a host can import: they travel by value, as
    # those of a script's __main__ do.
    cloudpickle.register_pickle_by_value(module)
    try:
        blocks = python_blocks(PAGE.read_text())
        assert len(blocks) >= 2
        for line, code in blocks:
            exec(compile(code, f"{PAGE}:{line}", "exec"), module.__dict__)
    finally:
        cloudpickle.unregister_pickle_by_value(module)


def test_the_docstring_example_runs(ray_cluster: Any) -> None:
    result = doctest.testmod(actors.ray._runtime)
    assert result.attempted > 0
    assert result.failed == 0
