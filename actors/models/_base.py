"""What both HTTP providers share: the client, one attempt of a request, retries, cancellation."""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from contextlib import suppress
from typing import Any, ClassVar, Self, cast

import httpx

from actors._logging import get_logger
from actors.exceptions import Cancelled, ModelError, UnexpectedModelResponse, UserError
from actors.models._accepts import EVERYTHING, Accepts
from actors.models._auth import ApiKey, KeyResolver, display_url
from actors.models._errors import (
    excerpt,
    malformed,
    redact,
    scrub,
    status_error,
    transport_error,
)
from actors.models._json_body import encode_body
from actors.models._model import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    check_model_requests_allowed,
)
from actors.models._pool import HTTPPool, Lease
from actors.models._retry import RetryableError, RetryPolicy, send_with_retries
from actors.models._sse import StreamAssembler, iter_sse
from actors.models._tokens import TokenCounting

__all__ = ["DEFAULT_TIMEOUT", "HTTPModel", "StreamAssembler"]

_log = get_logger("actors.models")

DEFAULT_TIMEOUT = httpx.Timeout(300.0, connect=10.0)
"""Connect within 10 s; then each read, write or pool wait may take 300 s (long replies)."""


class HTTPModel(TokenCounting, ABC):
    """A model behind an HTTP API, sharing connections with the models that talk to its server.

    Without an ``http_client`` of its own, a model takes a lease on the shared clients of its
    server's origin on the running event loop (see `HTTPPool`): the actors runtime sends every
    model request from one loop thread, so all its models share one set of connections. A
    model used from another loop later takes a lease there; `aclose` gives the lease back,
    and the last one closes the clients.

    A request holding a part the model does not take (see `accepts`) is refused with
    `UnsupportedContentError` before anything is sent. A provider class says what its models
    take in ``default_accepts`` (`HTTPModel`'s: anything); ``accepts=`` overrides it per model.
    """

    provider: ClassVar[str]
    _path: ClassVar[str]
    default_accepts: ClassVar[Accepts] = EVERYTHING

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str,
        keys: KeyResolver,
        http_client: httpx.AsyncClient | None,
        timeout: float | httpx.Timeout | None,
        retry: RetryPolicy | None,
        settings: ModelSettings | None,
        label: str,
        pool: HTTPPool | None = None,
        accepts: Accepts | None = None,
    ) -> None:
        if accepts is not None and not isinstance(accepts, Accepts):
            raise UserError(f"accepts must be an Accepts, got {type(accepts).__name__}")
        self._accepts = accepts if accepts is not None else self.default_accepts
        self._model_name = model_name
        self._base_url = base_url.rstrip("/")
        self._keys = keys
        self._user_client = http_client
        default = None if http_client is not None else DEFAULT_TIMEOUT  # yours keeps its own
        self._timeout = httpx.Timeout(timeout) if timeout is not None else default
        self._retry = retry if retry is not None else RetryPolicy()
        self._settings: ModelSettings = dict(settings or {})  # type: ignore[assignment]
        self._label = label
        self._lease = Lease(self._base_url, pool if pool is not None else HTTPPool())
        self._url = httpx.URL(self._base_url + self._path)  # parsed once, not per request

    # -- what providers fill in ------------------------------------------------------------

    @abstractmethod
    def _body(self, request: ModelRequest, settings: ModelSettings, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``."""

    @abstractmethod
    def _auth(self, key: ApiKey) -> httpx.Auth:
        """How ``key`` goes into the request."""

    @abstractmethod
    def _parse(self, data: Any) -> ModelResponse:
        """A whole (non-streamed) reply; raises `UnexpectedModelResponse` when malformed."""

    @abstractmethod
    def _assembler(self) -> StreamAssembler:
        """A fresh assembler for one streamed reply."""

    def _headers(self) -> dict[str, str]:
        return {}

    def _finish(
        self, response: ModelResponse, request: ModelRequest, settings: ModelSettings
    ) -> ModelResponse:
        """The reply as the agent should see it (native structured output unwraps here)."""
        return response

    # -- public face ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``"<provider>:<model>"``, the same form `infer_model` reads."""
        return f"{self._label}:{self._model_name}"

    @property
    def model_name(self) -> str:
        """The model as the provider names it."""
        return self._model_name

    @property
    def base_url(self) -> str:
        """Where requests go (without the endpoint's path)."""
        return self._base_url

    @property
    def pool(self) -> HTTPPool:
        """How this model shares connections with the others that talk to its server."""
        return self._lease.pool

    @property
    def accepts(self) -> Accepts:
        """What content the model takes; a request with anything else is refused unsent."""
        return self._accepts

    @property
    def retry(self) -> RetryPolicy:
        """When failed requests are retried."""
        return self._retry

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the complete reply.

        Streams when ``settings["stream"]`` is true, and by default whenever
        ``request.on_delta`` is set; each piece goes to ``on_delta`` as it arrives.

        Raises:
            ModelAuthenticationError: No key is set, or the provider refused it (never retried).
            ModelHTTPError: The provider answered with an error status, after any retries.
            ModelTimeoutError: The provider did not answer in time, after any retries.
            UnexpectedModelResponse: The reply could not be understood.
            ModelError: The connection failed, after any retries.
            ModelRequestsDisabled: Real model requests are switched off.
            UnsupportedContentError: The request holds a part the model does not take, or is
                larger than it takes (see `accepts`); nothing was sent.
            Cancelled: ``request.cancellation`` was set; the request in flight was closed.
        """
        # What the model takes is a property of the request, whatever the network switch says.
        binary = self._accepts.check(request.messages, self.name)
        check_model_requests_allowed(self.name)
        request.cancellation.raise_if_cancelled()
        settings: ModelSettings = {**self._settings, **request.settings}
        stream = bool(settings.get("stream", request.on_delta is not None))
        key = self._keys.resolve()
        content = encode_body(self._body(request, settings, stream), splice=binary > 0)
        self._accepts.check_size(len(content), self.name)
        timeout = self._timeout
        if "timeout" in settings:
            timeout = httpx.Timeout(settings["timeout"])

        log = _log.bind(model=self.name, agent_id=request.agent_id)

        async def attempt() -> ModelResponse:
            try:
                return await self._attempt(content, key, stream, request, timeout, log)
            except RetryableError as failure:
                raise RetryableError(scrub(failure.error, key), failure.retry_after) from None
            except ModelError as error:
                raise scrub(error, key) from None

        # Retries happen here, inside one `request()` call, before any reply is returned.
        # Tools run only after the agent loop receives a reply, so a retry can never make a
        # tool run twice; the worst it repeats is the model's own work.
        retried = send_with_retries(attempt, self._retry, log=log)
        response = await self._cancellable(request, retried, log)
        return self._finish(response, request, settings)

    async def aclose(self) -> None:
        """Give back this model's lease on the shared clients (a client passed in stays open).

        The last lease given back closes the clients; the next request takes a new lease.
        """
        await self._lease.give_back()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        url = display_url(self._base_url)
        return f"{type(self).__name__}({self._model_name!r}, base_url={url!r})"

    def __getstate__(self) -> dict[str, Any]:
        # A client cannot cross processes, and a key given as a plain string never travels in
        # pickled data (Ray copies specs by pickling): the receiving side reads its own
        # environment, or calls the key function it was given.
        if self._user_client is not None:
            raise TypeError(
                f"{self!r} uses an http_client that cannot be pickled; "
                "build the model where it will run"
            )
        state = dict(self.__dict__)
        state["_keys"] = self._keys.without_explicit_string()
        return state

    # -- machinery --------------------------------------------------------------------------

    async def _cancellable(self, request: ModelRequest, work: Any, log: Any) -> ModelResponse:
        """Await ``work``; a cancel of ``request.cancellation`` from any thread stops it.

        The token's callback only schedules the task's cancel on this loop; `finished`
        (touched only on this loop) makes a late callback harmless.
        """
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        finished = False
        ours = False

        def cancel_task() -> None:
            nonlocal ours
            if not finished:
                ours = True
                task.cancel("model request cancelled")

        def on_cancel(reason: str) -> None:
            # A closed loop raises RuntimeError; then nothing is in flight on it.
            with suppress(RuntimeError):
                loop.call_soon_threadsafe(cancel_task)

        unregister = request.cancellation.on_cancel(on_cancel)
        try:
            return cast(ModelResponse, await work)
        except asyncio.CancelledError:
            if ours and task.uncancel() == 0:
                log.info("model.cancelled", reason=request.cancellation.reason)
                raise Cancelled(request.cancellation.reason or "cancelled") from None
            raise
        finally:
            finished = True
            unregister()

    async def _attempt(
        self,
        content: bytes,
        key: ApiKey | None,
        stream: bool,
        request: ModelRequest,
        timeout: httpx.Timeout | None,
        log: Any,
    ) -> ModelResponse:
        args = (content, key, stream, request, timeout, log)
        if self._user_client is not None:
            return await self._exchange(self._user_client, *args)
        stripes = self._lease.stripes()  # by hand: no async generator per request
        try:
            slot = await stripes.acquire(timeout.pool if timeout is not None else None)
            try:
                return await self._exchange(stripes.client(slot), *args)
            finally:
                stripes.release(slot)
        except httpx.HTTPError as exc:  # no connection came free in time (`_exchange` maps its own)
            raise transport_error(exc, key, self.name, replied=False) from exc

    async def _exchange(
        self,
        client: httpx.AsyncClient,
        content: bytes,
        key: ApiKey | None,
        stream: bool,
        request: ModelRequest,
        timeout: httpx.Timeout | None,
        log: Any,
    ) -> ModelResponse:
        http_request = client.build_request(
            "POST",
            self._url,
            content=content,
            headers={
                "content-type": "application/json",
                "accept": "text/event-stream" if stream else "application/json",
                **self._headers(),
            },
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )
        auth = self._auth(key) if key is not None else None
        started = time.monotonic()
        try:
            response = await client.send(
                http_request,
                auth=auth if auth is not None else httpx.USE_CLIENT_DEFAULT,
                stream=True,
            )
        except httpx.HTTPError as exc:
            raise transport_error(exc, key, self.name, replied=False) from exc
        try:
            log.debug(
                "model.response",
                status=response.status_code,
                seconds=round(time.monotonic() - started, 3),
            )
            if not response.is_success:
                raise await status_error(response, key)
            content_type = response.headers.get("content-type", "")
            # Some OpenAI-compatible servers ignore `stream: true` and answer in one piece.
            if stream and "text/event-stream" in content_type:
                return await self._read_stream(response, request, key)
            return await self._read_whole(response, key)
        finally:
            with suppress(httpx.HTTPError):  # closing a broken stream may complain again
                await response.aclose()

    async def _read_whole(self, response: httpx.Response, key: ApiKey | None) -> ModelResponse:
        try:
            raw = await response.aread()
        except httpx.HTTPError as exc:
            raise transport_error(exc, key, self.name, replied=False) from exc
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            text = excerpt(redact(key, raw.decode("utf-8", "replace")), 200)
            raise UnexpectedModelResponse(
                f"{self.name} answered with malformed JSON: {text}"
            ) from exc
        with malformed(self.name):
            return self._parse(data)

    async def _read_stream(
        self, response: httpx.Response, request: ModelRequest, key: ApiKey | None
    ) -> ModelResponse:
        assembler = self._assembler()
        emitted = False
        try:
            async for event in iter_sse(response.aiter_text()):
                with malformed(self.name):
                    deltas = list(assembler.feed(event))
                for delta in deltas:
                    if request.on_delta is not None:
                        emitted = True
                        request.on_delta(delta)
                if assembler.done:
                    break
        except RetryableError as failure:
            # Once listeners have seen part of this reply, a second attempt would show them
            # its start again; fail instead, and let the caller decide.
            if emitted:
                raise failure.error from failure.__cause__
            raise
        except httpx.HTTPError as exc:
            raise transport_error(exc, key, self.name, replied=emitted) from exc
        if not assembler.complete:
            error = UnexpectedModelResponse(
                f"{self.name}'s stream ended before the reply was complete"
            )
            if emitted:
                raise error
            raise RetryableError(error)
        with malformed(self.name):
            return assembler.response()
