"""Toolsets: sources of tools that are known only at run time (an MCP server, for one).

A `Toolset` is configuration, part of an immutable `Agent` spec. Its live side is a
`ToolsetView` that a host opens once (one per host, shared by every agent that uses the same
toolset) through a `ToolsetHost`: the host provides the event loop the view does its I/O on,
keeps the views, and closes them when it shuts down.

The seam with the agent loop is one non-blocking call: `ToolsetView.tools_nowait()` returns
the tools as last listed (a cached tuple). The loop reads it at each step and never waits;
listing, refreshing and reconnecting happen on the host's event loop. The host's side is
`actors.loop._toolset_host.ToolsetHost`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from actors._logging import get_logger
from actors.loop._tools import Tool

__all__ = ["Toolset", "ToolsetView", "merge_tools"]

_log = get_logger("actors.toolsets")


@runtime_checkable
class ToolsetView(Protocol):
    """The live side of a toolset in one host: its connection and its cached tool list."""

    def tools_nowait(self) -> tuple[Tool, ...]:
        """The tools as last listed. Never blocks, never does I/O (the agent loop calls it)."""
        ...

    async def aprepare(self) -> None:
        """Open the toolset and list its tools, if not done yet (runs on the host's loop).

        Raises:
            Exception: the toolset cannot be opened or listed.
        """
        ...

    async def aclose(self) -> None:
        """Close the connection (runs on the host's loop); later calls may open it again."""
        ...


@runtime_checkable
class Toolset(Protocol):
    """A source of tools listed at run time, given to an agent with ``Agent(toolsets=[...])``.

    Toolsets are configuration: equal toolsets (by ``key``) share one live view per host.
    """

    @property
    def name(self) -> str:
        """A short name for messages and logs."""
        ...

    @property
    def key(self) -> Hashable:
        """Identity within a host: toolsets with equal keys share one view (one connection)."""
        ...

    def open_view(self, loop: asyncio.AbstractEventLoop) -> ToolsetView:
        """Make the live view, bound to ``loop``, without connecting (that is ``aprepare``)."""
        ...


def merge_tools(
    static: dict[str, Tool], listed: Sequence[tuple[str, tuple[Tool, ...]]], taken: Iterable[str]
) -> dict[str, Tool]:
    """The tools an agent offers at one step: its own, then each toolset's, first name wins.

    A toolset that starts offering a taken name after spawn (its list changed) loses that tool,
    with a warning: the names the model sees stay unique.
    """
    tools = dict(static)
    used = set(tools) | set(taken)
    for source, toolset_tools in listed:
        for tool in toolset_tools:
            if tool.name in used:
                _log.warning(
                    "toolset tool hidden: its name is taken", toolset=source, tool=tool.name
                )
                continue
            used.add(tool.name)
            tools[tool.name] = tool
    return tools
