"""The request body's encoder: spliced long strings give the plain encoder's bytes, faster."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from actors.exceptions import UserError
from actors.models._json_body import encode_body


def plain(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, allow_nan=False).encode()


def test_splicing_gives_the_plain_encoders_bytes() -> None:
    data = base64.b64encode(bytes(range(256)) * 1000).decode()
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": 'é "quoted" \\ \x01'}]},
            {"content": [{"source": {"data": data}}, {"url": "data:image/png;base64," + data}]},
            {"content": 'long but escaped: "' * 10_000},  # long, not plain: encoded as usual
            {"content": "long with a control character \x1f" * 3000},
            {"content": "ünïcode " * 10_000, "n": 1.5, "ok": True, "none": None},
        ],
        "tools": ({"name": "t"},),
    }
    assert encode_body(body, splice=True) == plain(body)
    assert encode_body(body) == plain(body)


def test_what_cannot_be_json_is_the_callers_mistake() -> None:
    with pytest.raises(UserError, match="cannot be sent as JSON"):
        encode_body({"x": float("nan")}, splice=True)
    with pytest.raises(UserError, match="cannot be sent as JSON"):
        encode_body({"x": object()})
