"""MCP servers as toolsets: where a server is (a command, a URL) and how its tools are offered."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from actors.exceptions import UserError

__all__ = ["MCPServerHTTP", "MCPServerStdio"]

_NAME = re.compile(r"[^A-Za-z0-9_-]")


def _check_common(
    name: str,
    prefix: str | None,
    names: Mapping[str, str] | None,
    timeout: float,
    tool_timeout: float | None,
) -> None:
    if prefix is not None and (not prefix or _NAME.search(prefix)):
        raise UserError(
            f"MCP server {name!r}: prefix {prefix!r} must be letters, digits, '_' or '-'"
        )
    if names is not None:
        if not isinstance(names, Mapping):
            raise UserError(
                f"MCP server {name!r}: names must map the server's tool names to the names "
                f"to offer, such as {{'search': 'docs_search'}}; got {type(names).__name__}"
            )
        for source, offered in names.items():
            if not isinstance(source, str) or not isinstance(offered, str):
                raise UserError(f"MCP server {name!r}: names must map str to str")
            if not offered or _NAME.search(offered):
                raise UserError(
                    f"MCP server {name!r}: names[{source!r}] = {offered!r} must be letters, "
                    "digits, '_' or '-'"
                )
        offered_twice = sorted({v for v in names.values() if list(names.values()).count(v) > 1})
        if offered_twice:
            raise UserError(f"MCP server {name!r}: names offers two tools as {offered_twice[0]!r}")
    if timeout <= 0:
        raise UserError(f"MCP server {name!r}: timeout must be positive, got {timeout}")
    if tool_timeout is not None and tool_timeout <= 0:
        raise UserError(f"MCP server {name!r}: tool_timeout must be positive or None")


@dataclass(frozen=True, eq=False, kw_only=True)
class _MCPServer:
    """What every MCP toolset shares (see `MCPServerStdio` for the attributes)."""

    name: str = ""
    prefix: str | None = None
    names: Mapping[str, str] | None = None
    timeout: float = 30.0
    tool_timeout: float | None = None
    requires_approval: bool | Collection[str] = False

    def _assign(
        self,
        own: dict[str, Any],
        *,
        name: str,
        prefix: str | None,
        names: Mapping[str, str] | None,
        timeout: float,
        tool_timeout: float | None,
        requires_approval: bool | Collection[str],
    ) -> None:
        """Check the options every server takes, then set them and the server's ``own``."""
        _check_common(name, prefix, names, timeout, tool_timeout)
        common = {
            "name": name,
            "prefix": prefix,
            "names": dict(names) if names is not None else None,
            "timeout": timeout,
            "tool_timeout": tool_timeout,
            "requires_approval": requires_approval,
        }
        for attribute, value in {**own, **common}.items():
            object.__setattr__(self, attribute, value)  # a frozen dataclass

    def tool_name(self, server_name: str) -> str:
        """The name the model calls the server's tool ``server_name`` by."""
        if self.names and server_name in self.names:
            return self.names[server_name]
        name = _NAME.sub("_", server_name)
        return f"{self.prefix}_{name}" if self.prefix else name

    def rename_hint(self, server_name: str, *, alone: bool = False) -> str:
        """How to offer the server's tool ``server_name`` under another name (for errors).

        ``alone``: the clash is between two tools of this server, which a prefix cannot part.
        """
        prefix = _NAME.sub("_", self.name) or "server"
        renamed = f"{prefix}_{_NAME.sub('_', server_name)}"
        kind = type(self).__name__
        by_name = f"{kind}(..., names={{{server_name!r}: {renamed!r}}})"
        if alone:
            return f"a prefix cannot tell them apart: rename one with {by_name}"
        return (
            f"rename it: {kind}(..., prefix={prefix!r}) offers every tool of server "
            f"{self.name!r} with a prefix ({renamed!r}), or {by_name} renames that tool alone"
        )

    def needs_approval(self, server_name: str) -> bool:
        """Whether calls of the server's tool ``server_name`` wait for the host's approval."""
        if isinstance(self.requires_approval, bool):
            return self.requires_approval
        return server_name in self.requires_approval

    @property
    def key(self) -> Hashable:
        """Equal servers (same place, same options) share one connection per runtime."""
        raise NotImplementedError

    def open_view(self, loop: asyncio.AbstractEventLoop) -> Any:
        """The connection to this server for one host, not yet connected."""
        from actors.mcp._connection import MCPConnection

        return MCPConnection(self, loop)

    def transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The SDK transport to enter for one connection."""
        raise NotImplementedError

    def _common_key(self) -> tuple[Hashable, ...]:
        approval: Hashable = (
            self.requires_approval
            if isinstance(self.requires_approval, bool)
            else tuple(sorted(self.requires_approval))
        )
        names = tuple(sorted(self.names.items())) if self.names is not None else None
        return (self.prefix, names, self.timeout, self.tool_timeout, approval)


@dataclass(frozen=True, eq=False, kw_only=True)
class MCPServerStdio(_MCPServer):
    """An MCP server run as a subprocess, spoken to over its stdin and stdout.

    The process starts when the first agent that uses it is spawned, is shared by every agent
    of the runtime that uses an equal server (subagents included), is started again after it
    crashes (on the next call), and is stopped when the runtime shuts down.

    Example:
        ``Agent("a", toolsets=[MCPServerStdio("python", ["server.py"], prefix="files")])``

    Attributes:
        command: The program to run.
        args: Its arguments.
        env: Variables for the server's environment. The SDK starts the server with a minimal
            environment (PATH, HOME, USER, ...); pass what it needs, such as an API key.
        cwd: The server's working directory (the current one by default).
        name: A name for messages and logs; the script's or the command's name by default.
        prefix: Offer the server's tools as ``<prefix>_<tool>`` (to avoid name collisions).
        names: Offer some tools under names of your choice, as ``{server's name: name}``
            (``{"search": "docs_search"}``); the prefix does not apply to them.
        timeout: Seconds to start the server and list its tools.
        tool_timeout: Seconds per call of its tools; the agent's ``tool_timeout`` by default.
        requires_approval: True to hold every call of its tools for the host's approval, or
            the names (as the server calls them) of the tools that need it.
        stderr: Where the server's stderr goes (a file with a descriptor); this process's
            stderr by default.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None
    stderr: TextIO | None = field(default=None, repr=False)

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str = "",
        prefix: str | None = None,
        names: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        tool_timeout: float | None = None,
        requires_approval: bool | Collection[str] = False,
        stderr: TextIO | None = None,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise UserError(f"MCPServerStdio needs a command, got {command!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise UserError(f"MCPServerStdio: args must be a list of strings, got {args!r}")
        name = name or _default_name(command, args)
        own = {
            "command": command,
            "args": tuple(args),
            "env": dict(env) if env is not None else None,
            "cwd": cwd,
            "stderr": stderr,
        }
        self._assign(
            own,
            name=name,
            prefix=prefix,
            names=names,
            timeout=timeout,
            tool_timeout=tool_timeout,
            requires_approval=requires_approval,
        )

    @property
    def key(self) -> Hashable:
        """Equal servers (same command, arguments, environment and options) share a process."""
        env = tuple(sorted(self.env.items())) if self.env is not None else None
        cwd = str(self.cwd) if self.cwd is not None else None
        return ("stdio", self.command, tuple(self.args), env, cwd, *self._common_key())

    def transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The SDK's stdio transport for one run of the server."""
        from mcp import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env is not None else None,
            cwd=self.cwd,
        )
        errlog = self.stderr if self.stderr is not None else sys.stderr
        try:
            errlog.fileno()
        except (AttributeError, OSError, ValueError):  # no descriptor (a captured stream)
            errlog = _devnull()
        return stdio_client(params, errlog=errlog)


@dataclass(frozen=True, eq=False, kw_only=True)
class MCPServerHTTP(_MCPServer):
    """An MCP server at a streamable HTTP URL (such as ``http://127.0.0.1:8000/mcp``).

    Connected when the first agent that uses it is spawned, shared by every agent of the
    runtime that uses an equal server, reconnected after a failure (on the next call), and
    disconnected when the runtime shuts down.

    Attributes:
        url: The server's endpoint.
        headers: HTTP headers for every request (an ``Authorization`` header, say).
        name: A name for messages and logs; the URL's host by default.
        prefix: Offer the server's tools as ``<prefix>_<tool>``.
        names: Offer some tools under names of your choice, as ``{server's name: name}``.
        timeout: Seconds to connect and list the tools.
        tool_timeout: Seconds per call of its tools; the agent's ``tool_timeout`` by default.
        requires_approval: True, or the names of the tools whose calls need approval.
    """

    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str = "",
        prefix: str | None = None,
        names: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        tool_timeout: float | None = None,
        requires_approval: bool | Collection[str] = False,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise UserError(f"MCPServerHTTP needs an http(s) URL, got {url!r}")
        name = name or url.split("://", 1)[1].split("/", 1)[0]
        own = {"url": url, "headers": dict(headers) if headers is not None else None}
        self._assign(
            own,
            name=name,
            prefix=prefix,
            names=names,
            timeout=timeout,
            tool_timeout=tool_timeout,
            requires_approval=requires_approval,
        )

    @property
    def key(self) -> Hashable:
        """Equal servers (same URL, headers and options) share a connection."""
        headers = tuple(sorted(self.headers.items())) if self.headers is not None else None
        return ("http", self.url, headers, *self._common_key())

    def transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The SDK's streamable HTTP transport, on an HTTP client closed with it."""
        return _http_transport(self.url, dict(self.headers or {}))


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own defaults: a server may hold a response stream open for minutes.
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _default_name(command: str, args: Sequence[str]) -> str:
    """The script's or module's name (``python -m notes`` is ``notes``), else the command's."""
    if len(args) > 1 and args[0] == "-m":
        return args[1]
    scripts = [a for a in args if Path(a).suffix and not a.startswith("-") and " " not in a]
    return Path(scripts[0]).stem if scripts else Path(command).name


_DEVNULL: TextIO | None = None


def _devnull() -> TextIO:
    global _DEVNULL
    if _DEVNULL is None:
        _DEVNULL = open(os.devnull, "w")  # noqa: SIM115 (kept open for every server's stderr)
    return _DEVNULL
