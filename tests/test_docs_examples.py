"""The code in the docs and the README runs: every ```python block of each page, in order.

A page's blocks share one namespace, so a later block can use what an earlier one defined.
A block is skipped when the line before its fence is ``<!-- no-run -->``, or when its fence
carries attributes (```python title="..."): use either for code that needs a network, a key or
a terminal. Other pages (context, persistence, providers) are run by their owners' tests.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "README.md",
    "docs/index.md",
    "docs/actors.md",
    "docs/instructions.md",
    "docs/updates.md",
    "docs/events.md",
    "docs/parts.md",
    "docs/subagents.md",
    "docs/suspension.md",
    "docs/cancellation.md",
    "docs/streaming.md",
    "docs/hosting.md",
    "docs/output.md",
    "docs/history.md",
    "docs/compaction.md",
    "docs/budgets.md",
    "docs/fallback.md",
    "docs/writing-a-provider.md",
    "docs/testing.md",
    "docs/cli.md",
    "docs/serving.md",
    "docs/observability.md",
    "docs/mcp.md",
    "docs/a2a.md",
    "docs/simulation.md",
]
NO_RUN = "<!-- no-run -->"
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<attrs>.*)$")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The runnable python blocks of a page: (line number, code)."""
    lines = text.splitlines()
    blocks: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        start, indent = index, len(match["indent"])
        end = start + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        previous = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        runnable = match["lang"] == "python" and not match["attrs"].strip() and previous != NO_RUN
        if runnable:
            code = "\n".join(line[indent:] for line in lines[start + 1 : end])
            blocks.append((start + 1, code))
        index = end + 1
    return blocks


def test_the_extractor_honours_the_markers() -> None:
    page = (
        "```python\nx = 1\n```\n"
        '```python title="needs a key"\nraise SystemExit\n```\n'
        "<!-- no-run -->\n\n```python\nraise SystemExit\n```\n"
        "```bash\nactors demo\n```\n"
        "```python\ny = x + 1\n```\n"
    )
    assert [code for _, code in python_blocks(page)] == ["x = 1", "y = x + 1"]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files an example writes land in a scratch folder
    monkeypatch.setattr(sys, "path", sys.path[:])  # `actors run` may add the folder to it
    modules = set(sys.modules)
    monkeypatch.setenv("ACTORS_HOME", str(tmp_path / "home"))
    # A real module, so dataclasses and pickling find the classes an example defines.
    module = types.ModuleType(f"docs_{Path(page).stem}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    blocks = python_blocks((ROOT / page).read_text())
    assert blocks, f"{page} has no runnable example"
    for line, code in blocks:
        # dont_inherit: the page's code must not get this file's `from __future__` imports.
        exec(compile(code, f"{page}:{line}", "exec", dont_inherit=True), module.__dict__)
    for name in set(sys.modules) - modules:  # modules an example wrote into the scratch folder
        if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(tmp_path)):
            del sys.modules[name]
