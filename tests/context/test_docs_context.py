from __future__ import annotations

import re
from pathlib import Path

from structlog.testing import capture_logs

DOC = Path(__file__).parents[2] / "docs" / "context.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


def test_the_blocks_are_found() -> None:
    assert len(python_blocks(DOC.read_text())) >= 8


def test_docs_context_code_runs_in_order() -> None:
    namespace: dict[str, object] = {"__name__": "docs_context"}
    with capture_logs() as logs:  # keep the out-of-range replace warning off the output
        for number, block in enumerate(python_blocks(DOC.read_text()), 1):
            code = compile(block, f"{DOC.name} block {number}", "exec")
            exec(code, namespace)
    assert [log["event"] for log in logs] == ["replace outside the transcript ignored"]
