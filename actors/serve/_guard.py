"""The server's gate: a bearer token (compared in constant time) and a rate limit per client.

A pure ASGI middleware, so it also guards streamed responses and routes mounted beside the API
(an A2A app): everything but the public paths (the chat page, its files, the OpenAPI document,
the health check) needs the token when one is set.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Collection
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from actors.serve._errors import error_response

__all__ = ["DEFAULT_RATE_LIMIT", "Guard", "RateLimit"]


@dataclass(frozen=True)
class RateLimit:
    """A token bucket per client: ``burst`` requests at once, refilled at ``per_second``.

    Attributes:
        per_second: Requests a client may make per second, sustained.
        burst: Requests a client may make at once.
    """

    per_second: float = 20.0
    burst: int = 100


DEFAULT_RATE_LIMIT = RateLimit()


class _Buckets:
    def __init__(self, limit: RateLimit, max_clients: int = 100_000) -> None:
        self._limit = limit
        self._max = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)

    def take(self, client: str) -> float:
        """0 when the client may go on; else the seconds until it may."""
        now = time.monotonic()
        tokens, at = self._buckets.get(client, (float(self._limit.burst), now))
        tokens = min(float(self._limit.burst), tokens + (now - at) * self._limit.per_second)
        if tokens < 1.0:
            self._buckets[client] = (tokens, now)
            return (1.0 - tokens) / self._limit.per_second
        if len(self._buckets) >= self._max and client not in self._buckets:
            self._buckets.clear()  # a flood of addresses: forget them all rather than grow
        self._buckets[client] = (tokens - 1.0, now)
        return 0.0


class Guard:
    """Checks the token and the rate of every HTTP request before the app sees it."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        rate_limit: RateLimit | None,
        public: Collection[str],
    ) -> None:
        self.app = app
        self._token = token.encode() if token else None
        self._buckets = _Buckets(rate_limit) if rate_limit is not None else None
        self._public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        public = path in self._public or path.startswith("/static/")
        given = _bearer(scope)
        # Constant time, and compared even when none was given, so timing tells nothing.
        if (
            self._token is not None
            and not public
            and not hmac.compare_digest(given or b"", self._token)
        ):
            response = error_response(
                401,
                "unauthorized",
                "this server needs 'Authorization: Bearer TOKEN' (the token it was started with)",
                {"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        if self._buckets is not None and not public:
            client = scope.get("client")
            wait = self._buckets.take(client[0] if client else "-")
            if wait > 0:
                response = error_response(
                    429,
                    "rate_limited",
                    f"too many requests; try again in {wait:.1f} s",
                    {"Retry-After": str(max(1, round(wait)))},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, credentials = value.partition(b" ")
            if scheme.lower() == b"bearer":
                return bytes(credentials.strip())
    return None
