"""Griffe extension: a Google-style ``Example:`` section is read as ``Examples:``.

Griffe parses only the plural title as an examples section (doctests rendered as code); the
singular, which the library's docstrings use, would otherwise be rendered as plain Markdown.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SINGULAR = re.compile(r"^(\s*)Example:[ \t]*$", re.M)


class ExampleSections(griffe.Extension):
    """Rename ``Example:`` section titles to ``Examples:`` as objects are loaded."""

    def on_instance(self, *, obj: griffe.Object, **_kwargs: Any) -> None:
        """Griffe event: runs on every object as it is created."""
        if obj.docstring is not None:
            obj.docstring.value = _SINGULAR.sub(r"\1Examples:", obj.docstring.value)
