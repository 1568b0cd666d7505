"""A small reader of Google-style docstrings: the summary and the ``Args:`` descriptions."""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Example|Examples|Note|Notes|Attributes):\s*$"
)
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return the description (everything before the first section) and each argument's text."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        match = _SECTION.match(stripped) if not line.startswith(" ") else None
        if match:
            section, current, arg_indent = match.group(1), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in {"Args", "Arguments", "Parameters"} or not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        arg = _ARG.match(stripped)
        if arg and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = arg.group(1).lstrip("*")
            args[current] = arg.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary).strip(), args
