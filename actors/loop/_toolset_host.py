"""`ToolsetHost`: a host's live toolsets (one view per toolset, opened on its event loop).

The toolsets themselves (`Toolset`, `ToolsetView`) are configuration and live in
`actors.loop._toolset`; this module is their live side, which a host owns. What a host must do:

1. Own a `ToolsetHost` around the event loop its async tools run on.
2. Before an agent tree's first step, call `ToolsetHost.prepare` (blocking; from a thread that
   may block, such as the one calling ``spawn``) so every toolset of the tree is open and its
   tools listed; it raises `AgentDefinitionError` on a name collision or a toolset that cannot
   be opened. `ToolsetHost.prepare_then` is the non-blocking form (a callback when done).
3. Give each `AgentLoop` the host (``toolsets=host``).
4. Call `ToolsetHost.close` at shutdown, before its event loop stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from actors._logging import get_logger
from actors.exceptions import AgentDefinitionError, UserError
from actors.loop._agent import Agent
from actors.loop._output import FINAL_RESULT_TOOL
from actors.loop._toolset import Toolset, ToolsetView

__all__ = ["CLOSE_TIMEOUT", "PREPARE_TIMEOUT", "ToolsetHost", "check_names", "toolsets_of_tree"]

_log = get_logger("actors.toolsets")

PREPARE_TIMEOUT = 60.0
"""Seconds `ToolsetHost.prepare` waits for the toolsets of a tree by default."""

CLOSE_TIMEOUT = 10.0
"""Seconds `ToolsetHost.close` gives the views to close."""


def toolsets_of_tree(spec: Agent[Any]) -> list[tuple[Agent[Any], Toolset]]:
    """Every (agent, toolset) pair of ``spec`` and its subagents, each spec once."""
    seen: set[int] = set()
    out: list[tuple[Agent[Any], Toolset]] = []
    todo = [spec]
    while todo:
        agent = todo.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        out.extend((agent, toolset) for toolset in agent.toolsets)
        todo.extend(s.agent for s in agent.subagent_map.values())
    return out


class ToolsetHost:
    """A host's toolset views: one per toolset key, on one event loop, closed at shutdown.

    Thread-safe. The runtime owns one around its effects loop; the `SyncDriver` one around a
    loop thread of its own.

    Args:
        loop: The running event loop (in another thread) the views do their I/O on.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._thread: threading.Thread | None = None
        self._views: dict[Hashable, ToolsetView] = {}
        # Specs whose toolsets are all open, by id (held, so an id is never reused meanwhile).
        self._prepared: dict[int, Agent[Any]] = {}
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def with_own_loop(cls) -> ToolsetHost:
        """A host running an event loop of its own on a daemon thread, stopped by `close`.

        For hosts without a loop of their own, such as the `SyncDriver`.
        """
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="actors-toolsets", daemon=True)
        thread.start()
        host = cls(loop)
        host._thread = thread
        return host

    def view(self, toolset: Toolset) -> ToolsetView:
        """The host's view of ``toolset`` (made on first use, not connected). Never blocks."""
        with self._lock:
            view = self._views.get(toolset.key)
            if view is None:
                view = self._views[toolset.key] = toolset.open_view(self.loop)
            return view

    def views(self, toolsets: Iterable[Toolset]) -> tuple[ToolsetView, ...]:
        """The views of ``toolsets``, in order. Never blocks."""
        return tuple(self.view(t) for t in toolsets)

    def is_prepared(self, spec: Agent[Any]) -> bool:
        """Whether every toolset of ``spec``'s tree was opened by `prepare`."""
        return id(spec) in self._prepared or not toolsets_of_tree(spec)

    async def aprepare(self, spec: Agent[Any]) -> None:
        """Open every toolset of ``spec``'s tree, then check tool names (on the host's loop).

        Raises:
            AgentDefinitionError: a toolset cannot be opened, or two sources of one agent offer
                the same tool name.
        """
        pairs = toolsets_of_tree(spec)
        if self._closed:
            raise AgentDefinitionError("the host is shut down: its toolsets cannot be opened")
        views = {id(t): self.view(t) for _, t in pairs}
        unique = {id(v): (t, v) for t, v in ((t, views[id(t)]) for _, t in pairs)}
        results = await asyncio.gather(
            *(v.aprepare() for _, v in unique.values()), return_exceptions=True
        )
        for (toolset, _), result in zip(unique.values(), results, strict=True):
            if isinstance(result, BaseException):
                error = AgentDefinitionError(
                    f"toolset {toolset.name!r} could not be opened: "
                    f"{type(result).__name__}: {result}"
                )
                raise error from result
        for agent in {id(a): a for a, _ in pairs}.values():
            check_names(agent, [(t, views[id(t)]) for t in agent.toolsets])
        self._prepared[id(spec)] = spec

    def prepare_then(self, spec: Agent[Any], done: Callable[[BaseException | None], None]) -> None:
        """Open ``spec``'s toolsets without blocking; call ``done(error or None)`` after.

        ``done`` runs at once, on the calling thread, when there is nothing left to open;
        otherwise on the host's loop.
        """
        if self.is_prepared(spec):
            done(None)
            return
        future = asyncio.run_coroutine_threadsafe(self.aprepare(spec), self.loop)
        future.add_done_callback(lambda f: done(None if f.cancelled() else f.exception()))

    def prepare(self, spec: Agent[Any], timeout: float = PREPARE_TIMEOUT) -> None:
        """Open every toolset of ``spec``'s tree and check its tool names (blocking).

        Call it from a thread that may block (never from the host's loop, never from an
        agent's message handler).

        Raises:
            AgentDefinitionError: a toolset cannot be opened in ``timeout`` seconds, or its
                tool names collide with another source of the same agent.
        """
        if self.is_prepared(spec):
            return
        if _running_loop() is self.loop:
            raise UserError(
                f"agent {spec.name!r}: its toolsets must be opened from a thread that may block, "
                "not from the runtime's event loop (an async tool); spawn it from a sync tool "
                "or before the run"
            )
        future = asyncio.run_coroutine_threadsafe(self.aprepare(spec), self.loop)
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AgentDefinitionError(
                f"agent {spec.name!r}: its toolsets were not open within {timeout:g} s"
            ) from None

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close every view (blocking; not from the host's loop). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            views = list(self._views.values())
        if views and not self.loop.is_closed():

            async def close_all() -> None:
                results = await asyncio.gather(*(v.aclose() for v in views), return_exceptions=True)
                for result in results:
                    if isinstance(result, BaseException):
                        _log.warning("closing a toolset failed", exc_info=result)

            try:
                asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(timeout)
            except (concurrent.futures.TimeoutError, RuntimeError):
                _log.warning("toolsets did not close in time", timeout=timeout)
        if self._thread is not None:  # the loop is ours: stop it
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self.loop.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def check_names(agent: Agent[Any], sources: Sequence[tuple[Toolset, ToolsetView]]) -> None:
    """Refuse an agent whose toolsets offer a name its tools, subagents or other toolsets use.

    A toolset may say more than its name: a view's ``source_names(offered)`` gives the names
    the tools offered as ``offered`` have at their source (an MCP server's ``files.read`` is
    offered as ``files_read``), and a toolset's ``rename_hint(source_name, alone=...)`` how to
    offer one under another name.

    Raises:
        AgentDefinitionError: naming both tools, their sources, and how to rename one.
    """
    owner: dict[str, str] = {t.name: "its tools" for t in agent.tool_map.values()}
    owner.update({name: "its subagents" for name in agent.subagent_map})
    if agent.output_type is not None and agent.output_type is not str:
        owner[FINAL_RESULT_TOOL] = "its structured output"
    for toolset, view in sources:
        for tool in view.tools_nowait():
            offered = tool.name
            names = _source_names(view, offered)
            other = owner.get(offered)
            if other is None and len(names) == 1:
                owner[offered] = _origin(toolset, names[0], offered)
                continue
            if other is None:  # two tools of this one source map to one name
                listed = " and ".join(repr(name) for name in names)
                clash = (
                    f"tools {listed} of toolset {toolset.name!r} are both offered as {offered!r}"
                )
                source, alone = next((n for n in names if n != offered), names[0]), True
            elif other.startswith("tool "):
                what = _origin(toolset, names[0], offered)
                clash = f"{other} and {what} are both offered as {offered!r}"
                source, alone = names[0], False
            else:
                clash = f"{_origin(toolset, names[0], offered)} has the name of a tool in {other}"
                source, alone = names[0], False
            raise AgentDefinitionError(
                f"agent {agent.name!r}: {clash}; {_rename_hint(toolset, source, alone=alone)}"
            )


def _origin(toolset: Toolset, source: str, offered: str) -> str:
    named = repr(source) if source == offered else f"{source!r} (offered as {offered!r})"
    return f"tool {named} of toolset {toolset.name!r}"


def _source_names(view: ToolsetView, offered: str) -> tuple[str, ...]:
    source_names = getattr(view, "source_names", None)  # optional: not every view renames
    names = tuple(source_names(offered)) if callable(source_names) else ()
    return names or (offered,)


def _rename_hint(toolset: Toolset, source: str, *, alone: bool) -> str:
    hint = getattr(toolset, "rename_hint", None)  # optional: not every toolset can rename
    if callable(hint):
        return str(hint(source, alone=alone))
    return "give the toolset a prefix (e.g. prefix='docs') or rename the tool"
