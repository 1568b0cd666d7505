"""Issue 25, item 10: the docs list spawn's keywords in one table that matches the code, and
no table of the docs is split in two by a blank line."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from actors import Runtime
from actors.ray import RayRuntime
from actors.sim import Simulation

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def _rows(section: str) -> dict[str, list[str]]:
    # keyword -> the cells after it, from the rows of the first table of ``section``.
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`(\w+)(?:=[^`]*)?`(?: \(positional\))?", cells[0])
        if line.startswith("|") and match:
            rows[match.group(1)] = cells[1:]
    return rows


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_table_is_split_by_a_blank_line(page: Path) -> None:
    lines = page.read_text().splitlines()
    for i in range(1, len(lines) - 1):
        before, blank, after = lines[i - 1], lines[i], lines[i + 1]
        header = i + 2 < len(lines) and lines[i + 2].startswith("| ---")
        if before.startswith("|") and not blank.strip() and after.startswith("|") and not header:
            pytest.fail(f"{page.name}:{i + 2}: a table row after a blank line starts a new table")


def test_the_spawn_table_lists_every_keyword_of_every_host() -> None:
    text = (ROOT / "docs" / "actors.md").read_text()
    section = text.split("### What `spawn` takes", 1)[1].split("\n#", 1)[0]
    rows = _rows(section)
    hosts = [Runtime.spawn, Simulation.spawn, RayRuntime.spawn]
    for column, spawn in enumerate(hosts):
        taken = set(inspect.signature(spawn).parameters) - {"self"}
        listed = {name for name, cells in rows.items() if not cells[column].startswith("no")}
        assert listed == taken, spawn.__qualname__
