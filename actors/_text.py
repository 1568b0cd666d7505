r"""The text rule: what enters a context is valid Unicode, so it can always be encoded again.

A Python `str` may hold lone surrogates (``"\ud800"``): half of a UTF-16 pair, which no UTF-8
encoder takes. One that reached an agent's log used to fail every later request of the
session in the request encoder. So every door through which text enters (prompts, steering and
peer messages, provider replies, tool results, metadata, event data) passes it through
`clean_text` or `clean_json`: a lone surrogate becomes U+FFFD (the replacement character), a
high/low pair that was split into two code points becomes the character it encodes, and every
other string, NUL included, passes unchanged (no normalization either). Readers of logs that an
older version wrote apply the same rule.

Replacing, not refusing: a user cannot see the code point they would be refused for, and a
provider's reply or a tool's result cannot be refused at all without losing the run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator

__all__ = ["Text", "clean_json", "clean_text", "has_surrogate_escape", "id_problem", "is_clean"]

_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_clean(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (holds no surrogate code point)."""
    if text.isascii():  # O(1) in CPython: the common case costs nothing
        return True
    # A scan, not a trial encode: no copy of a long text is made just to be thrown away.
    return _SURROGATE.search(text) is None


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the same object when it has none).

    A surrogate pair (high then low) is joined into the character it stands for, as a UTF-16
    reader would; everything else, NUL and unnormalized forms included, is kept as it is.
    """
    if is_clean(text):
        return text
    # UTF-16 with surrogatepass writes each code point as one unit; decoding joins the pairs
    # and replaces what is left alone.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_json(value: Any) -> Any:
    """A JSON value with `clean_text` applied to every string and key inside it.

    Returns ``value`` itself when nothing needed a change, so a clean value is never copied.
    """
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = clean_text(key) if isinstance(key, str) else key
            new_item = clean_json(item)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [clean_json(item) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items if isinstance(value, list) else tuple(items)
        return value
    return value


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an id or a name that a store keeps (None when it can).

    Ids are refused, not repaired: replacing a code point could make two ids one. A lone
    surrogate cannot be encoded, and PostgreSQL's text columns refuse NUL.
    """
    if "\x00" in value:
        return "it contains NUL (\\x00)"
    if not is_clean(value):
        return "it contains a lone surrogate, which is not valid Unicode"
    return None


def has_surrogate_escape(json_text: str) -> bool:
    r"""Whether JSON text may decode to a surrogate (it has a ``\uD800``-``\uDFFF`` escape).

    Text written with ``ensure_ascii`` escapes every astral character as such a pair too, so a
    match only says that decoded strings are worth a look with `clean_json`.
    """
    return _ESCAPE.search(json_text) is not None


Text = Annotated[str, AfterValidator(clean_text)]
"""A `str` field of a pydantic model that follows the text rule (messages, requests)."""
