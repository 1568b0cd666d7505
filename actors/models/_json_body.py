"""A request body as JSON bytes, with the base64 of large parts spliced in as it is.

A 20 MB PDF is 27 MB of base64 in the body of every request of the session that holds it, and
JSON-escaping that text (which has nothing to escape) costs most of building the body. So when
a request holds binary parts, long strings that need no escaping (printable ASCII without a
quote or a backslash: base64, data: URLs) are left out of the encoder's work and spliced into
its output. The bytes are the ones the plain encoder writes.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from actors.exceptions import UserError

__all__ = ["encode_body"]

_LONG = 64 * 1024
"""Strings shorter than this are left to the encoder: splicing them saves nothing."""

_PLAIN = bytes(c for c in range(0x20, 0x7F) if c not in b'"\\')
"""What JSON writes as it is: printable ASCII but the quote and the backslash."""


def encode_body(body: dict[str, Any], *, splice: bool = False) -> bytes:
    """``body`` as JSON bytes; with ``splice``, long plain strings skip the encoder.

    Raises:
        UserError: Something in ``body`` cannot be JSON (the caller's mistake).
    """
    pieces: list[bytes] = []
    nonce = secrets.token_hex(16) if splice else ""
    try:
        value = _marked(body, pieces, nonce) if splice else body
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UserError(f"the request cannot be sent as JSON: {exc}") from exc
    if not pieces:
        return text.encode()
    chunks = re.split(f'"{nonce}:(\\d+)"', text)
    out = [chunks[0].encode()]
    for at in range(1, len(chunks), 2):
        out += [b'"', pieces[int(chunks[at])], b'"', chunks[at + 1].encode()]
    return b"".join(out)


def _marked(value: Any, pieces: list[bytes], nonce: str) -> Any:
    """``value`` with each long plain string replaced by a placeholder naming its piece."""
    if isinstance(value, str):
        if len(value) >= _LONG and value.isascii():
            raw = value.encode("ascii")
            if not raw.translate(None, _PLAIN):  # nothing but characters JSON writes as they are
                pieces.append(raw)
                return f"{nonce}:{len(pieces) - 1}"
        return value
    if isinstance(value, dict):
        return {key: _marked(item, pieces, nonce) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_marked(item, pieces, nonce) for item in value]
    return value
