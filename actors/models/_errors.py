"""How failures of a request become the typed errors of `actors.exceptions`.

Whatever a server or the network does, `request()` raises a `ModelError` (or `Cancelled`):
these functions decide which one, and whether the retry loop may try again. Every text taken
from a reply has the key masked, then is cut short (in that order: a key straddling the cut
would survive in part), since servers sometimes echo it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from actors.exceptions import (
    ActorsError,
    ContextTooLongError,
    ModelAuthenticationError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    UnexpectedModelResponse,
)
from actors.models._auth import ApiKey
from actors.models._retry import RetryableError, parse_retry_after

__all__ = ["excerpt", "malformed", "redact", "scrub", "status_error", "transport_error"]

_EXCERPT = 500
_MAX_ERROR_BODY = 64 * 1024
# Statuses where the same request may succeed later: timeout, conflict, rate limit.
_RETRY_STATUSES = frozenset({408, 409, 429})


def excerpt(text: str, limit: int = _EXCERPT) -> str:
    """The start of ``text``, on one line, marked when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@contextmanager
def malformed(model: str) -> Iterator[None]:
    """Turn a reply's missing field or wrong type into `UnexpectedModelResponse`."""
    try:
        yield
    except (KeyError, IndexError, TypeError, AttributeError, ValueError, RecursionError) as exc:
        if isinstance(exc, ActorsError):
            raise
        raise UnexpectedModelResponse(
            f"{model}'s reply is missing a field or has one of the wrong type "
            f"({type(exc).__name__}: {excerpt(str(exc), 200)})"
        ) from exc


def redact(key: ApiKey | None, text: str) -> str:
    """``text`` with the key masked, if there is a key."""
    return key.redact(text) if key is not None else text


def scrub(error: ModelError, key: ApiKey | None) -> ModelError:
    """Make ``error`` safe to log and show anywhere, whatever the server put into it.

    Its message and body get the key masked. Its cause, context and traceback go: their
    frames hold the raw reply and the request's headers in local variables, which a
    traceback printer that shows locals (rich, structlog's dev renderer) would print. The
    message already names the underlying failure.
    """
    error.args = tuple(redact(key, arg) if isinstance(arg, str) else arg for arg in error.args)
    if isinstance(error, ModelHTTPError):
        error.body = redact(key, error.body)
    error.__cause__ = None
    error.__context__ = None
    error.__suppress_context__ = True
    error.__traceback__ = None
    return error


def transport_error(
    exc: httpx.HTTPError, key: ApiKey | None, model: str, *, replied: bool
) -> Exception:
    """Map an httpx failure to what the retry loop should see.

    ``replied``: part of the reply already reached ``on_delta``, so no retry may follow.
    """
    detail = redact(key, f"{type(exc).__name__}: {exc}")
    error: ModelError
    if isinstance(exc, httpx.TimeoutException):
        error = ModelTimeoutError(f"{model} did not answer in time ({detail})")
    elif isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ModelError(f"{model} cannot be reached at that URL ({detail})")
    elif isinstance(exc, httpx.DecodingError):
        return UnexpectedModelResponse(f"{model}'s reply could not be decoded ({detail})")
    elif isinstance(exc, httpx.TransportError):
        error = ModelError(f"the connection to {model} failed ({detail})")
    else:
        return ModelError(f"the request to {model} failed ({detail})")
    return error if replied else RetryableError(error)


_TOO_LONG = (
    "context_length_exceeded",  # OpenAI's error code
    "maximum context length",  # OpenAI-compatible servers' wording
    "prompt is too long",  # Anthropic
    "context window",
    "too many tokens",
)


def _too_long(body: str) -> bool:
    """Whether an error body says the request was more than the model's context window."""
    lowered = body.lower()
    return any(marker in lowered for marker in _TOO_LONG)


async def status_error(response: httpx.Response, key: ApiKey | None) -> Exception:
    """Map an error status to a typed error, retryable or not."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= _MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass  # The status says enough; a body cut short only shortens the excerpt.
    # Mask first, then cut: a key straddling the cut would otherwise survive in part.
    body = excerpt(redact(key, b"".join(chunks).decode("utf-8", "replace")))
    status = response.status_code
    message = f"HTTP {status} from {response.request.url.host}: {body or response.reason_phrase}"
    if status in (401, 403):
        return ModelAuthenticationError(message, status_code=status, body=body)
    if status in (400, 413) and _too_long(body):
        return ContextTooLongError(message, status_code=status, body=body)
    error = ModelHTTPError(message, status_code=status, body=body)
    if status in _RETRY_STATUSES or status >= 500:
        return RetryableError(error, parse_retry_after(response.headers))
    return error
