r"""JSON at the server's door: bounded bodies in, lone surrogates out, never a crash on output.

A client may send ``"\ud800"`` (valid JSON, not valid Unicode): decoded as is, it would poison a
session (the store and every later response could not encode it). Every string of a body is
cleaned to U+FFFD here, before anything of the library sees it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from actors.serve._api_error import ApiError

__all__ = ["clean", "dumps", "json_response", "read_json"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(value: Any) -> Any:
    """``value`` (decoded JSON) with every lone surrogate, in keys and strings, made U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [clean(item) for item in value]
    if isinstance(value, dict):
        return {clean(key): clean(item) for key, item in value.items()}
    return value


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON; a lone surrogate that got in anyway becomes ``?``, never an error."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8", "replace")


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response of ``value``."""
    return Response(dumps(value), status, headers, media_type="application/json")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body, cleaned; an empty body is ``{}``.

    Raises:
        ApiError: ``body_too_large`` (413) past ``limit`` bytes (read no further), or
            ``bad_json`` (400) for a body that is not JSON.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "body_too_large", f"the body is over {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, "body_too_large", f"the body is over {limit} bytes")
    if not body.strip():
        return {}
    try:
        value = json.loads(bytes(body), parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        # UnicodeDecodeError is a ValueError: a body that is not UTF-8 is malformed too.
        raise ApiError(400, "bad_json", f"the body is not JSON: {exc}") from None
    return clean(value)
