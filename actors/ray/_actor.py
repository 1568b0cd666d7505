"""`AgentHostActor`: the Ray actor of one agent host (an async actor around a `HostServer`).

Every method answers with a value (`Outcome`, `Missing`): errors travel as values, never as
Ray task errors, so a caller tells "the host said no" from "the host died" (a Ray actor
error). What callers send to agents comes through `deliver`, in the order of each caller's
`Lane`: Ray itself keeps no order among an async actor's calls. Waiting (for a run's end, a
question's answer: a pull of an outbox) is an ``await`` on the actor's event loop, so a host
serves thousands of waiting calls at once; blocking work (stores, stopping agents) runs on the
loop's executor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import os
import warnings
from collections.abc import Sequence
from typing import Any

from actors.exceptions import AgentStoppedError
from actors.host import Ask, Query, StreamEvent, TreeNode
from actors.loop._agent import Agent
from actors.loop._budget import Budget
from actors.ray._inbox import deliver as deliver_inputs
from actors.ray._inputs import HostInput
from actors.ray._server import HostConfig, HostServer
from actors.ray._wire import Missing, Outcome, Taken, TreeSeed, portable_error

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
        import ray

        self.server = HostServer(index, names, namespace, config)
        with warnings.catch_warnings():  # Ray 2.x warns from inside it of its own API's age
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self.server.restarted = bool(restarted)

    async def ready(self) -> int:
        """The host's process id, once it is up."""
        return os.getpid()

    # -- the driver's calls ---------------------------------------------------------------------

    async def spawn(
        self,
        agent_id: str,
        spec: Agent[Any],
        seed: TreeSeed,
        metadata: dict[str, Any],
        budget: Budget | None = None,
    ) -> Outcome:
        try:
            spawn = self.server.spawn
            return Outcome(await _blocking(spawn, agent_id, spec, seed, metadata, budget))
        except Exception as exc:
            return _failed(exc)

    async def restore(
        self, session_id: str, specs: Sequence[Agent[Any]], seed: TreeSeed
    ) -> Outcome:
        try:
            return Outcome(await _blocking(self.server.restore, session_id, specs, seed))
        except Exception as exc:
            return _failed(exc)

    async def deliver(self, inputs: Sequence[HostInput]) -> list[Taken | Outcome | Missing]:
        """Apply one lane call's inputs in order (`actors.ray._inbox`), then answer."""
        return await deliver_inputs(self.server, inputs).answers()

    async def query_now(self, agent_id: str, what: str) -> Outcome | Missing:
        """Ask an agent in its own turn, outside any lane (a host's blocking question)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            self.server.local.send(agent_id, Ask(Query(what), future))
        except AgentStoppedError:
            return Missing(agent_id)
        except Exception as exc:
            return _failed(exc)
        try:
            return Outcome(await asyncio.wrap_future(future))
        except Exception as exc:
            return _failed(exc)

    async def status(self, agent_id: str) -> Outcome | Missing:
        return self.server.status(agent_id)

    async def passivate(self, agent_id: str, timeout: float) -> Outcome | Missing:
        """Put an idle tree to sleep in its store now; whether it was idle."""
        if not self.server.holds(agent_id):
            return Missing(agent_id)
        try:
            return Outcome(await _blocking(self.server.passivate, agent_id, timeout))
        except Exception as exc:
            return _failed(exc)

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
            node = server.local.nodes.get(agent_id)
            if node is not None:
                return {
                    "name": node.name,
                    "parent_id": node.parent_id,
                    "session_id": node.session_id,
                }
        dormant = server.local.virtual.dormant(agent_id)  # asleep: its record says
        if dormant is None:
            return None
        return {
            "name": dormant.names.get(agent_id, ""),
            "parent_id": dormant.parents.get(agent_id),
            "session_id": dormant.session_id,
        }

    async def peer_home(self, agent_id: str) -> bool:
        """Whether an agent of this id lives here, for a peer message from another host."""
        return self.server.peers.mail.home(agent_id)

    async def peers_drained(self) -> None:
        """Return once every peer message this host sent so far was answered by its host.

        Answered means logged by its receiver (or given up on): what tests and benchmarks
        wait on to know that messages sent across hosts have arrived.
        """
        waiting = [asyncio.wrap_future(f) for f in self.server.peers.mail.drained()]
        if waiting:
            await asyncio.gather(*waiting)

    async def live_agents(self) -> int:
        return self.server.live_agents()

    async def subscribe(self, agent_id: str, key: str) -> Outcome | Missing:
        return self.server.subscribe(agent_id, key)

    async def unsubscribe(self, key: str) -> None:
        self.server.unsubscribe(key)

    async def pull(self, key: str) -> list[Any]:
        """What the outbox ``key`` holds, once it holds something (a long poll)."""
        try:
            items, waiter = self.server.take(key)
            while not items and waiter is not None:
                await asyncio.wrap_future(waiter)
                items, waiter = self.server.take(key)
        except asyncio.CancelledError:
            self.server.drop_outbox(key)  # its reader gave up on it
            raise
        return items

    async def shutdown(self, timeout: float) -> None:
        await _blocking(self.server.shutdown, timeout)

    # -- calls between hosts --------------------------------------------------------------------

    async def stream_in(self, parent_id: str, events: tuple[StreamEvent, ...]) -> None:
        self.server.stream_in(parent_id, events)


def _splice(view: TreeNode, found: dict[str, TreeNode]) -> TreeNode:
    """``view`` with the subtrees that other hosts reported in place of their stand-ins."""
    if view.agent_id in found:
        return found[view.agent_id]
    children = tuple(_splice(child, found) for child in view.children)
    return dataclasses.replace(view, children=children)
