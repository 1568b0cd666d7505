"""`AgentHostActor`: the Ray actor of one agent host (an async actor around a `HostServer`).

Every method answers with a value (`Outcome`, `Missing`, `ChildEnd`): errors travel as values,
never as Ray task errors, so a caller tells "the host said no" from "the host died" (a Ray
actor error). Waiting (a run, a pull) is an ``await`` on the actor's event loop, so a host
serves thousands of waiting calls at once; blocking work (stores, stopping agents) runs on the
loop's executor.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from actors.context._usage import Usage
from actors.loop._agent import Agent
from actors.loop._types import ResumeRun, StartRun
from actors.ray._remote_child import Adopt
from actors.ray._server import HostConfig, HostServer
from actors.ray._wire import ChildEnd, Missing, Outcome, TreeSeed, WireReply, portable_error
from actors.runtime._stream import StreamEvent
from actors.runtime._tombstone import TreeNode

__all__ = ["AgentHostActor"]


def _failed(exc: BaseException) -> Outcome:
    return Outcome(error=portable_error(exc))


async def _blocking(function: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, function, *args)


class AgentHostActor:
    """One agent host: many agents of the runtime, in one Ray actor process.

    Args:
        index: Its index among the runtime's hosts.
        names: The Ray actor names of all hosts.
        namespace: Their Ray namespace.
        config: How hosts are set up.
    """

    def __init__(
        self, index: int, names: tuple[str, ...], namespace: str, config: HostConfig
    ) -> None:
        self.server = HostServer(index, names, namespace, config)

    async def ready(self) -> int:
        """The host's process id, once it is up."""
        return os.getpid()

    # -- the driver's calls ---------------------------------------------------------------------

    async def spawn(
        self, agent_id: str, spec: Agent[Any], seed: TreeSeed, metadata: dict[str, Any]
    ) -> Outcome:
        try:
            return Outcome(await _blocking(self.server.spawn, agent_id, spec, seed, metadata))
        except Exception as exc:
            return _failed(exc)

    async def restore(
        self, session_id: str, specs: Sequence[Agent[Any]], seed: TreeSeed
    ) -> Outcome:
        try:
            return Outcome(await _blocking(self.server.restore, session_id, specs, seed))
        except Exception as exc:
            return _failed(exc)

    async def run(
        self, agent_id: str, incarnation: str | None, kind: str, payload: Any, stream: str | None
    ) -> Outcome | Missing:
        try:
            answer = self.server.run(agent_id, incarnation, kind, payload, stream)
        except Exception as exc:
            return _failed(exc)
        result: Outcome | Missing = await asyncio.wrap_future(answer)
        return result

    async def tell(self, agent_id: str, incarnation: str | None, message: Any) -> Outcome | Missing:
        try:
            return self.server.tell(agent_id, incarnation, message)
        except Exception as exc:
            return _failed(exc)

    async def query(self, agent_id: str, incarnation: str | None, what: str) -> Outcome | Missing:
        try:
            answer = self.server.query(agent_id, incarnation, what)
        except Exception as exc:
            return _failed(exc)
        result: Outcome | Missing = await asyncio.wrap_future(answer)
        return result

    async def query_now(self, agent_id: str, what: str) -> Outcome | Missing:
        return await self.query(agent_id, None, what)

    async def status(self, agent_id: str) -> Outcome | Missing:
        return self.server.status(agent_id)

    async def tree(self, agent_id: str) -> Outcome | Missing:
        try:
            got = self.server.tree(agent_id)
            if isinstance(got, Missing):
                return got
            view, remote = got
            if not remote:
                return Outcome(view)
            peers = self.server.peers
            ids = list(remote)
            answers = await asyncio.gather(*(peers.call(remote[i], "tree", i) for i in ids))
            found = {
                i: answer.value
                for i, answer in zip(ids, answers, strict=True)
                if isinstance(answer, Outcome) and answer.error is None
            }
            return Outcome(_splice(view, found))
        except Exception as exc:
            return _failed(exc)

    async def stop(self, agent_id: str) -> Outcome:
        try:
            await _blocking(self.server.stop, agent_id)
            return Outcome()
        except Exception as exc:
            return _failed(exc)

    async def forget(self, session_id: str, under: str | None) -> int:
        count: int = await _blocking(self.server.forget, session_id, under)
        return count

    async def holds(self, agent_id: str) -> dict[str, Any] | None:
        server = self.server
        if not server.holds(agent_id):
            return None
        with server.local.lock:
            node = server.local.nodes[agent_id]
            return {"name": node.name, "parent_id": node.parent_id, "session_id": node.session_id}

    async def live_agents(self) -> int:
        return self.server.live_agents()

    async def subscribe(self, agent_id: str, key: str) -> Outcome | Missing:
        return self.server.subscribe(agent_id, key)

    async def unsubscribe(self, key: str) -> None:
        self.server.unsubscribe(key)

    async def pull(self, key: str) -> list[Any]:
        items, waiter = self.server.take(key)
        while not items and waiter is not None:
            await asyncio.wrap_future(waiter)
            items, waiter = self.server.take(key)
        return items

    async def shutdown(self, timeout: float) -> None:
        await _blocking(self.server.shutdown, timeout)

    # -- calls between hosts --------------------------------------------------------------------

    async def child_input(
        self,
        adopt: Adopt | None,
        child_id: str,
        message: StartRun | ResumeRun,
        wire: WireReply,
        keep: bool,
        stream: bool,
    ) -> ChildEnd:
        try:
            ended = self.server.peers.child_input(adopt, child_id, message, wire, keep, stream)
        except Exception as exc:
            return ChildEnd(None, portable_error(exc), Usage())
        result: ChildEnd = await asyncio.wrap_future(ended)
        return result

    async def child_expire(self, child_id: str, token: str, timeout: float) -> None:
        self.server.peers.child_expire(child_id, token, timeout)

    async def stream_in(self, parent_id: str, events: tuple[StreamEvent, ...]) -> None:
        self.server.stream_in(parent_id, events)


def _splice(view: TreeNode, found: dict[str, TreeNode]) -> TreeNode:
    """``view`` with the subtrees that other hosts reported in place of their stand-ins."""
    if view.agent_id in found:
        return found[view.agent_id]
    children = tuple(_splice(child, found) for child in view.children)
    return dataclasses.replace(view, children=children)
