"""MkDocs hook: doctest examples written bare in a page (``>>> ...``) render as code.

Pages such as persistence.md keep their examples as bare doctests so that ``doctest`` can run
them; without a fence, Markdown would read ``[...]`` in their output as links.
"""

from __future__ import annotations

import re
from typing import Any

_FENCE = re.compile(r"^\s*(```|~~~)")


def wrap_doctests(markdown: str) -> str:
    """Fence every run of doctest lines (a ``>>>`` line up to the next blank line)."""
    out: list[str] = []
    in_fence = in_doctest = False
    for line in markdown.split("\n"):
        if _FENCE.match(line) and not in_doctest:
            in_fence = not in_fence
        elif not in_fence:
            if not in_doctest and line.startswith(">>> "):
                out.append("```pycon")
                in_doctest = True
            elif in_doctest and not line.strip():
                out.append("```")
                in_doctest = False
        out.append(line)
    if in_doctest:
        out.append("```")
    return "\n".join(out)


def on_page_markdown(markdown: str, **_kwargs: Any) -> str:
    """MkDocs event: runs on each page's Markdown before it is rendered."""
    return wrap_doctests(markdown)
