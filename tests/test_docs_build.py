"""The documentation site builds with ``mkdocs build --strict``: no broken link or docstring."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None
    or importlib.util.find_spec("mkdocstrings_handlers") is None
    or importlib.util.find_spec("material") is None,
    reason='the docs toolchain is not installed: pip install -e ".[docs]"',
)


def test_site_builds_strictly(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=55,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    api = (tmp_path / "api" / "index.html").read_text()
    for name in (
        "actors.Runtime",
        "actors.AgentRef",
        "actors.testing.ScriptedModel",
        "actors.cli.main",
    ):
        assert f'id="{name}"' in api, name
    for page in ("index.html", "cli/index.html", "context/index.html", "persistence/index.html"):
        assert (tmp_path / page).exists(), page
