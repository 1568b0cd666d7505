"""Connections that models talking to one server share: small httpx clients behind one queue.

Measured against a loopback server answering in 200 ms (bench/real_models.py), 1,000 tasks x 3
requests: httpx looks at every connection of a client on each request, and at every request
waiting in it, so its CPU per request grows with both. One client for all took 18 ms of CPU a
request (100 connections, 900 requests waiting in it; a run took minutes), 9 ms with nothing
waiting in it, while clients of 10 connections took 1.0-1.4 ms and of one connection 0.9-1.0
ms. Creating a client costs about 90 ms of CPU (its SSL context), so a client per model does
not scale either. Hence, per event loop and origin (scheme, host, port):

- small clients (`HTTPPool.connections_per_client` connections each, one by default), created
  as needed and sharing one SSL context;
- one queue in front of them, so no request ever waits inside httpx: a burst beyond
  `HTTPPool.max_connections` waits here, in order, for at most the request's pool timeout,
  instead of timing out at connect;
- a lease per model; the clients close when the last model using them gives its lease back.

Credentials and headers go with each request (`httpx.Auth`, request headers), never on the
shared client, and the shared clients keep no cookies, so nothing of one model's requests
reaches another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import math
import ssl
import threading
import urllib.request
import weakref
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from actors.exceptions import UserError

if TYPE_CHECKING:
    from collections.abc import Hashable

__all__ = ["HTTPPool", "Lease", "SharedClients", "Stripes", "origin_of", "shared_clients"]


@dataclass(frozen=True, slots=True)
class HTTPPool:
    """How the models that talk to one server share their connections.

    Models built without an ``http_client`` of their own share connections with every other
    model that has the same scheme, host and port and an equal `HTTPPool`, on the same event
    loop (the runtime sends every model request from one loop). Keys and headers travel with
    each request, so models with different keys share connections safely.

    Attributes:
        max_connections: Requests in flight to one server at once; more wait their turn, in
            order, for at most the request's pool timeout (``httpx.Timeout.pool``).
        connections_per_client: Connections per httpx client; the ``max_connections`` are
            spread over ``ceil(max_connections / connections_per_client)`` clients, created
            as needed. httpx's CPU per request grows with the connections of one client
            (it looks at each of them on every request): 1 measured cheapest.
        keepalive_expiry: Seconds an idle connection stays open for the next request.

    Example:
        >>> HTTPPool(max_connections=200, connections_per_client=10).clients
        20
    """

    max_connections: int = 1000
    connections_per_client: int = 1
    keepalive_expiry: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_connections", "connections_per_client"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"HTTPPool({name}=...) takes a positive int, got {value!r}")
        expiry = self.keepalive_expiry
        if isinstance(expiry, bool) or not isinstance(expiry, int | float) or not expiry >= 0:
            raise UserError(f"HTTPPool(keepalive_expiry=...) takes seconds >= 0, got {expiry!r}")
        if math.isinf(expiry):
            raise UserError("HTTPPool(keepalive_expiry=...) must be finite")

    @property
    def clients(self) -> int:
        """How many httpx clients (stripes) hold the connections."""
        return -(-self.max_connections // self.connections_per_client)


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """A shared client must not carry one model's cookies into another's requests."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False


def origin_of(url: str) -> tuple[str, str, int | None]:
    """The (scheme, host, port) that connections to ``url`` are pooled by."""
    parsed = httpx.URL(url)
    port = parsed.port
    if port is None:
        port = {"http": 80, "https": 443}.get(parsed.scheme)
    return parsed.scheme, parsed.host, port


class Stripes:
    """The clients of one origin on one loop, and the queue in front of them.

    A slot is a client index; a client has ``connections_per_client`` slots. Free slots are
    a stack (the warmest connections are reused first, so light traffic keeps few open);
    waiters are served in order.
    """

    def __init__(
        self,
        pool: HTTPPool,
        loop: asyncio.AbstractEventLoop,
        key: Hashable,
        verify: ssl.SSLContext,
    ) -> None:
        self.pool = pool
        self.loop = loop
        self.key = key
        self.holders = 0
        self.in_flight = 0
        self._verify = verify
        self._clients: list[httpx.AsyncClient | None] = [None] * pool.clients
        per = pool.connections_per_client
        last = pool.max_connections - per * (pool.clients - 1)
        self._free = [
            index
            for index in reversed(range(pool.clients))
            for _ in range(last if index == pool.clients - 1 else per)
        ]
        self._waiters: deque[asyncio.Future[int]] = deque()
        self.closed = False
        # httpx reads the environment's proxies for every client it makes (a scan of every
        # variable: half of the ~85 us a client costs). Read once here: with none set, the
        # clients skip it (verify is our SSL context, so proxies are all the environment
        # gives a client); with some, each client reads them as usual.
        self._trust_env = bool(urllib.request.getproxies())

    @property
    def waiting(self) -> int:
        """Requests queued for a slot."""
        return sum(not waiter.done() for waiter in self._waiters)

    async def acquire(self, timeout: float | None) -> int:
        """A free slot (a client index), waiting at most ``timeout`` seconds for one.

        Raises:
            httpx.PoolTimeout: No slot came free in time.
        """
        if self._free:  # then nobody waits: `release` serves waiters before the stack
            self.in_flight += 1
            return self._free.pop()
        waiter: asyncio.Future[int] = self.loop.create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                slot = await waiter
        except TimeoutError:
            raise httpx.PoolTimeout(
                f"no connection came free within {timeout} s "
                f"({self.pool.max_connections} in flight to this server; see HTTPPool)"
            ) from None
        except BaseException:
            # Handed a slot just as the wait was cancelled: pass it on, or it is lost.
            if waiter.done() and not waiter.cancelled():
                self.in_flight += 1
                self.release(waiter.result())
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise
        self.in_flight += 1
        return slot

    def release(self, slot: int) -> None:
        """Give ``slot`` back: to the first request still waiting, else to the free stack."""
        self.in_flight -= 1
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(slot)
                return
        self._free.append(slot)

    def client(self, slot: int) -> httpx.AsyncClient:
        """The client behind ``slot``, created on first use."""
        client = self._clients[slot]
        if client is None:
            if self.closed:  # the last lease was given back while this request waited
                raise httpx.ConnectError("the model's shared HTTP clients were closed")
            size = self.pool.connections_per_client
            client = httpx.AsyncClient(
                limits=httpx.Limits(
                    max_connections=size,
                    max_keepalive_connections=size,  # keep what was opened: no churn
                    keepalive_expiry=self.pool.keepalive_expiry,
                ),
                verify=self._verify,
                cookies=http.cookiejar.CookieJar(policy=_NoCookies()),
                trust_env=self._trust_env,
            )
            self._clients[slot] = client
        return client

    async def aclose(self) -> None:
        """Close every client (requests still in flight on them fail)."""
        self.closed = True
        clients = [client for client in self._clients if client is not None]
        self._clients = [None] * len(self._clients)
        await asyncio.gather(*(client.aclose() for client in clients))


class SharedClients:
    """The process's shared clients, by event loop, origin and `HTTPPool`.

    A model takes a lease (`lease`) on its first request from a loop and gives it back when it
    closes (`release`); the last lease closes the clients. Clients of a loop that has closed
    are dropped (their connections died with it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[Hashable, Stripes]
        ] = weakref.WeakKeyDictionary()
        self._ssl: ssl.SSLContext | None = None

    def lease(self, url: str, pool: HTTPPool) -> Stripes:
        """The stripes for ``url``'s origin on the running loop, counting one more holder."""
        loop = asyncio.get_running_loop()
        key = (origin_of(url), pool)
        with self._lock:
            for closed in [other for other in self._by_loop if other.is_closed()]:
                del self._by_loop[closed]
            entries = self._by_loop.setdefault(loop, {})
            stripes = entries.get(key)
            if stripes is None:
                if self._ssl is None:
                    # ~90 ms of CPU, which httpx spends per client (even for plain http)
                    self._ssl = httpx.create_ssl_context()
                stripes = Stripes(pool, loop, key, self._ssl)
                entries[key] = stripes
            stripes.holders += 1
            return stripes

    def release(self, stripes: Stripes) -> bool:
        """One holder fewer; True when it was the last (the caller closes the clients)."""
        with self._lock:
            stripes.holders -= 1
            if stripes.holders > 0:
                return False
            entries = self._by_loop.get(stripes.loop)
            if entries is not None and entries.get(stripes.key) is stripes:
                del entries[stripes.key]
                if not entries:
                    del self._by_loop[stripes.loop]
            return True

    def live(self) -> list[Stripes]:
        """Every set of shared clients still open, on loops that still run (for tests)."""
        with self._lock:
            return [
                stripes
                for loop, entries in self._by_loop.items()
                if not loop.is_closed()
                for stripes in entries.values()
            ]


_SHARED = SharedClients()


class Lease:
    """One model's shares of the shared clients: one per event loop it sends requests from.

    A model used from two loops at once (a runtime's, and the application's own) holds a
    share on each, so neither loop's requests close the other's clients. It travels
    (pickled, copied) as its URL and pool only: clients never cross processes.
    """

    __slots__ = ("_held", "_url", "pool")

    def __init__(self, url: str, pool: HTTPPool) -> None:
        if not isinstance(pool, HTTPPool):
            raise UserError(f"pool= takes an HTTPPool, got {type(pool).__name__}")
        self._url = url
        self.pool = pool
        self._held: dict[asyncio.AbstractEventLoop, Stripes] = {}

    def __reduce__(self) -> tuple[object, ...]:
        return (Lease, (self._url, self.pool))

    @property
    def held(self) -> list[Stripes]:
        """The shared clients this lease holds a share of (one set per loop)."""
        return list(self._held.values())

    def stripes(self) -> Stripes:
        """The shared clients on the running loop (a share taken on first use there)."""
        loop = asyncio.get_running_loop()
        stripes = self._held.get(loop)
        if stripes is None or stripes.closed:
            self._forget_closed_loops()
            stripes = self._held[loop] = _SHARED.lease(self._url, self.pool)
        return stripes

    def _forget_closed_loops(self) -> None:
        for loop, stripes in list(self._held.items()):
            if loop.is_closed() or stripes.closed:
                del self._held[loop]
                if not stripes.closed:
                    _SHARED.release(stripes)  # its connections died with their loop

    async def give_back(self) -> None:
        """Give back the share on the running loop (the last one closes the clients there).

        Shares on loops that have closed are given back too; shares on other running loops
        stay, for the requests still to come there.
        """
        self._forget_closed_loops()
        stripes = self._held.pop(asyncio.get_running_loop(), None)
        if stripes is not None and not stripes.closed and _SHARED.release(stripes):
            await stripes.aclose()


def shared_clients() -> SharedClients:
    """The process's registry of shared clients."""
    return _SHARED
