"""One live connection to an MCP server, per runtime: its tool list, its calls, its restarts.

Everything here runs on the host's event loop, except `tools_nowait` (any thread: it reads a
tuple). The connection is held open by a task of its own (the SDK's client is an async context
manager whose task groups must be entered and left by one task); calls are made from the tool
calls' tasks beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol, cast

import anyio
import mcp.types as mcp_types
from mcp import Client, MCPError
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from actors._dependency_logs import quiet_dependency_logs
from actors._logging import get_logger
from actors._safe import exception_text, safe_repr
from actors.context._parts import AudioPart, BinaryPart, DocumentPart, ImagePart, coerce_content
from actors.context._run_context import RunContext
from actors.exceptions import Cancelled, MCPProtocolError, UserError
from actors.loop._outcome import outcome_of_error, render
from actors.loop._tools import Tool
from actors.loop._types import ToolOutcome

__all__ = ["MCPConnection", "ServerSpec"]

_log = get_logger("actors.mcp")

_MAX_PAGES = 100  # a server whose tool list never ends cannot hang a listing
CLOSE_TIMEOUT = 10.0
# The SDK's loggers ("client" is the name its session logs under): silent unless asked.
_SDK_LOGGERS = ("mcp", "client")


class ServerSpec(Protocol):
    """What a connection reads of its server's configuration (`MCPServerStdio`, ...)."""

    @property
    def name(self) -> str:
        """The server's name, for messages and logs."""

    @property
    def timeout(self) -> float:
        """Seconds to start the server and list its tools."""

    @property
    def tool_timeout(self) -> float | None:
        """Seconds per call of its tools (None: the agent's)."""

    def transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Open the transport to the server."""

    def tool_name(self, server_name: str) -> str:
        """The name a tool of the server is offered under."""

    def needs_approval(self, server_name: str) -> bool:
        """Whether a call of the tool needs an approval."""


class MCPConnection:
    """The `ToolsetView` of one MCP server in one host.

    Args:
        server: The server's configuration.
        loop: The host's event loop; every coroutine here runs on it.
    """

    def __init__(self, server: ServerSpec, loop: asyncio.AbstractEventLoop) -> None:
        self.server = server
        self.loop = loop
        self._tools: tuple[Tool, ...] = ()
        self._source_names: dict[str, tuple[str, ...]] = {}  # offered name -> server's names
        self._client: Client | None = None
        self._pending: asyncio.Future[Client] | None = None
        self._runners: dict[asyncio.Task[None], asyncio.Event] = {}
        self._stops: dict[int, asyncio.Event] = {}  # by id of the client a runner holds
        self._relist: asyncio.Task[None] | None = None
        self._relist_again = False
        self._closed = False
        # Set when the server writes a line that is not JSON-RPC: the calls waiting then fail.
        self._garbled: asyncio.Future[str] | None = None
        self._log = _log.bind(mcp_server=server.name)
        quiet_dependency_logs(*_SDK_LOGGERS)

    def __repr__(self) -> str:
        state = "open" if self._client is not None else "closed"
        return f"<MCPConnection {self.server.name!r} {state}, {len(self._tools)} tools>"

    # -- the view the agent loop reads --------------------------------------------------------

    def tools_nowait(self) -> tuple[Tool, ...]:
        """The tools as last listed (kept while the server restarts)."""
        return self._tools

    def source_names(self, offered: str) -> tuple[str, ...]:
        """The server's own names of the tools offered as ``offered`` (two when they clash)."""
        return self._source_names.get(offered, (offered,))

    async def aprepare(self) -> None:
        """Connect and list the tools, if not connected yet."""
        await self._connected()

    async def aclose(self) -> None:
        """Disconnect (and stop a stdio server's process); no call reconnects after this."""
        self._closed = True
        for stop in self._runners.values():
            stop.set()
        if self._relist is not None:
            self._relist.cancel()
        runners = list(self._runners)
        if runners:
            _done, stuck = await asyncio.wait(runners, timeout=CLOSE_TIMEOUT)
            for task in stuck:
                task.cancel()

    # -- connecting ---------------------------------------------------------------------------

    async def _connected(self) -> Client:
        """The open client; connects (and lists the tools) first when there is none."""
        if self._client is not None:
            return self._client
        if self._closed:
            raise UserError(f"the connection to MCP server {self.server.name!r} is closed")
        if self._pending is None:
            pending: asyncio.Future[Client] = self.loop.create_future()
            pending.add_done_callback(_retrieve)
            self._pending = pending
            stop = asyncio.Event()
            runner = self.loop.create_task(self._run(pending, stop))
            self._runners[runner] = stop
            runner.add_done_callback(lambda task: self._runners.pop(task, None))

            def give_up() -> None:
                # Waiters hear of it now; the abandoned server is stopped in the background.
                if not pending.done():
                    pending.set_exception(
                        TimeoutError(f"not connected within {self.server.timeout:g} s")
                    )
                    runner.cancel()

            self.loop.call_later(self.server.timeout, give_up)
        return await asyncio.shield(self._pending)

    async def _run(self, pending: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """Hold one connection open until ``stop`` is set or it fails."""
        client: Client | None = None
        try:
            async with Client(
                self.server.transport(),
                message_handler=self._on_message,
                cache=None,  # the tool list is cached here, and refreshed on change
                client_info=mcp_types.Implementation(name="actors", version=_version()),
            ) as client:
                await self._list(client)
                self._client = client
                self._stops[id(client)] = stop
                pending.set_result(client)
                async with anyio.create_task_group() as group:
                    group.start_soon(self._watch, client)
                    await stop.wait()
                    group.cancel_scope.cancel()
        except asyncio.CancelledError:
            if client is None and pending.done():
                return  # the connection attempt was given up (`give_up`): nobody waits on it
            if not pending.done():
                pending.set_exception(ConnectionError("the connection attempt was cancelled"))
            raise
        except Exception as exc:  # the SDK raises many kinds (OSError, MCPError, groups)
            if not pending.done():
                pending.set_exception(_unwrap(exc))
            else:
                self._log.warning("connection to MCP server ended", error=repr(_unwrap(exc)))
        finally:
            if client is not None:
                self._stops.pop(id(client), None)
                if self._client is client:
                    self._client = None
            if self._pending is pending:
                self._pending = None

    def _drop(self, client: Client) -> None:
        """Forget a client whose connection is gone (its runner ends); the next call reconnects."""
        if self._client is client:
            self._client = None
            self._pending = None
            self._log.warning("MCP server connection lost; it is reopened on the next call")
        stop = self._stops.pop(id(client), None)
        if stop is not None:
            stop.set()

    # -- the tool list ------------------------------------------------------------------------

    async def _list(self, client: Client) -> None:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        made = tuple(self._make_tool(t) for t in tools)
        source_names: dict[str, tuple[str, ...]] = {}
        for tool, listed in zip(made, tools, strict=True):
            source_names[tool.name] = (*source_names.get(tool.name, ()), listed.name)
        self._source_names = source_names
        self._tools = made

    def _make_tool(self, listed: mcp_types.Tool) -> Tool:
        server_name = listed.name

        async def call(ctx: RunContext[Any], **arguments: Any) -> ToolOutcome:
            return await self.call(server_name, arguments, ctx)

        return Tool.from_schema(
            self.server.tool_name(server_name),
            listed.description or listed.title or "",
            listed.input_schema,
            call,
            timeout=self.server.tool_timeout,
            requires_approval=self.server.needs_approval(server_name),
        )

    async def _watch(self, client: Client) -> None:
        """On a 2026 connection, subscribe to tool list changes (a 2025 one sends them anyway)."""
        capability = client.server_capabilities.tools
        if capability is None or not capability.list_changed:
            return
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._changed(client)
        except ListenNotSupportedError:
            return  # a 2025-era connection: changes arrive as notifications (`_on_message`)
        except Exception:
            return

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # the transport could not read what the server wrote
            self._on_garbage(message)
            return
        # A 2025-era server notifies anyway; a 2026 one is heard through `_watch`.
        client = self._client
        if (
            isinstance(message, mcp_types.ToolListChangedNotification)
            and client is not None
            and client.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            self._changed(client)

    def _on_garbage(self, exc: Exception) -> None:
        """The server wrote something that is not JSON-RPC: fail the calls waiting on it.

        Which call the line belonged to cannot be known, and its answer may never come; a
        call that waited for its timeout would only hide the server's fault.
        """
        what = _describe_garbage(exc)
        self._log.warning("MCP server wrote a line that is not JSON-RPC", line=what)
        garbled, self._garbled = self._garbled, None
        if garbled is not None and not garbled.done():
            garbled.set_result(what)

    def _garbled_waiter(self) -> asyncio.Future[str]:
        if self._garbled is None or self._garbled.done():
            self._garbled = self.loop.create_future()
        return self._garbled

    def _changed(self, client: Client) -> None:
        """The server's tool list changed: list it again (one listing at a time)."""
        if self._relist is not None and not self._relist.done():
            self._relist_again = True
            return
        self._relist = self.loop.create_task(self._relist_tools(client))

    async def _relist_tools(self, client: Client) -> None:
        while True:
            self._relist_again = False
            try:
                async with asyncio.timeout(self.server.timeout):
                    await self._list(client)
            except Exception as exc:  # the old list stays; the next change tries again
                self._log.warning("could not list the tools again", error=exception_text(exc))
                return
            if not self._relist_again:
                return

    # -- calls --------------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any], ctx: RunContext[Any]) -> ToolOutcome:
        """Call the server's tool ``name``, within ``ctx``'s timeout and cancellation.

        Cancelling the run (or the call's timeout) cancels the request, which sends the
        server MCP's ``notifications/cancelled``. Every failure is an error outcome for the
        model; a lost connection is reopened on the next call.
        """
        if asyncio.get_running_loop() is not self.loop:
            # Called from another loop (the SyncDriver's asyncio.run): run it on ours.
            future = asyncio.run_coroutine_threadsafe(self.call(name, arguments, ctx), self.loop)
            try:
                return await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                future.cancel()
                raise
        inner = asyncio.ensure_future(self._call(name, arguments, ctx.timeout))

        def cancel(_reason: str) -> None:
            self.loop.call_soon_threadsafe(inner.cancel)

        unregister = ctx.cancellation.on_cancel(cancel)
        try:
            return await inner
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling() == 0 and ctx.cancellation.cancelled:
                # Our own cancel (the run's token), not one of this task's: a tool result.
                raise Cancelled(ctx.cancellation.reason or "cancelled") from None
            raise
        finally:
            unregister()

    async def _call(
        self, name: str, arguments: dict[str, Any], timeout: float | None
    ) -> ToolOutcome:
        server = self.server.name
        try:
            async with asyncio.timeout(timeout):
                try:
                    client = await self._connected()
                except Exception as exc:  # cannot start or reach the server: tell the model
                    error = _unwrap(exc)
                    return ToolOutcome(
                        f"The MCP server {server!r} could not be reached: {exception_text(error)}",
                        is_error=True,
                    )
                try:
                    result = await self._call_tool(client, name, arguments)
                except MCPProtocolError as exc:
                    return outcome_of_error(exc)
                except MCPError as exc:
                    if exc.code == mcp_types.CONNECTION_CLOSED:
                        self._drop(client)
                        return ToolOutcome(
                            f"The MCP server {server!r} closed the connection (it may have "
                            "crashed); it is started again on the next call.",
                            is_error=True,
                        )
                    return ToolOutcome(f"MCP error {exc.code}: {exc.message}", is_error=True)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._drop(client)
                    return ToolOutcome(
                        f"The MCP server {server!r} connection failed: {type(exc).__name__}: "
                        f"{exc}; it is reopened on the next call.",
                        is_error=True,
                    )
                # A call that changed the tool list returns once the new list is in, so the
                # model's next step sees it.
                relist = self._relist
                if relist is not None and not relist.done():
                    await asyncio.shield(relist)
        except TimeoutError:
            return outcome_of_error(TimeoutError(), timeout)
        except Exception as exc:  # a malformed reply, say: still a result for the model
            self._log.warning("MCP call failed", tool=name, exc_info=exc)
            return outcome_of_error(exc)
        return outcome_of_result(result)

    async def _call_tool(
        self, client: Client, name: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        """``client.call_tool``, failed at once when the server writes what is not JSON-RPC.

        Raises:
            MCPProtocolError: The server wrote a line that is not JSON-RPC meanwhile.
        """
        garbled = self._garbled_waiter()
        call = asyncio.ensure_future(client.call_tool(name, arguments))
        try:
            await asyncio.wait((call, garbled), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not call.done():
                call.cancel()  # tells the server (notifications/cancelled)
                call.add_done_callback(_retrieve)
        if call.done() and not call.cancelled():
            return call.result()
        raise MCPProtocolError(
            self.server.name,
            f"the MCP server {self.server.name!r} wrote something that is not a JSON-RPC "
            f"message ({garbled.result()}) while the call of {name!r} waited, so the call was "
            "abandoned; a stdio server must write only JSON-RPC to its stdout (its logs and "
            "prints belong on stderr)",
        )


def _describe_garbage(exc: Exception) -> str:
    """What the server wrote, shortly: the start of the line, or what was wrong with it."""
    errors = getattr(exc, "errors", None)
    given: Any = None
    if callable(errors):
        try:
            given = errors()[0].get("input")
        except Exception:
            given = None
    if isinstance(given, str):
        shown = given if len(given) <= 80 else f"{given[:77]}..."
        return f"the line {safe_repr(shown)}"
    if given is not None:
        return "JSON that is not a JSON-RPC message"
    return exception_text(exc)[:200]


def outcome_of_result(result: mcp_types.CallToolResult) -> ToolOutcome:
    """What the model reads of a tool result: its text blocks, and images and audio as parts.

    A binary block that is not what it claims (bad base64, bytes of another format) is shown as
    a placeholder, so one bad block does not fail the call.
    """
    texts = [_block_text(block) for block in result.content]
    structured = result.structured_content
    if not texts and structured is not None:
        texts = [cast("str", render(structured))]
    text = "\n".join(texts)
    output = structured if structured is not None else text
    binary = [_block_part(block) for block in result.content]
    if not any(binary):
        return ToolOutcome(text, is_error=bool(result.is_error), output=output)
    content = coerce_content(
        [part if part is not None else shown for part, shown in zip(binary, texts, strict=True)]
    )
    return ToolOutcome(content, is_error=bool(result.is_error), output=output)


def _block_part(block: Any) -> BinaryPart | None:
    """An image, audio or embedded binary resource as a part; None for anything else."""
    try:
        if isinstance(block, mcp_types.ImageContent):
            return ImagePart(data=block.data, media_type=block.mime_type)
        if isinstance(block, mcp_types.AudioContent):
            return AudioPart(data=block.data, media_type=block.mime_type)
        if isinstance(block, mcp_types.EmbeddedResource) and isinstance(
            block.resource, mcp_types.BlobResourceContents
        ):
            resource = block.resource
            media_type = resource.mime_type or "application/octet-stream"
            if media_type.startswith(("image/", "audio/")):
                return None
            return DocumentPart(data=resource.blob, media_type=media_type, name=str(resource.uri))
    except ValueError:
        return None
    return None


def _block_text(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource {block.uri}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[resource {resource.uri}, {resource.mime_type or 'binary'}]"
    return cast("str", render(getattr(block, "model_dump", lambda: block)()))


def _unwrap(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups from task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _version() -> str:
    from actors import __version__

    return __version__
