"""A host that is one of many looks up a tool's receivers before its agent checks them."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import Any

from actors import Agent, ContextUpdate, RunContext, TreeLimits
from actors.context._events import system_clock
from actors.host._messages import HostReply
from actors.loop._types import SendMessage, StartRun
from actors.runtime._local import LocalHost
from actors.testing import ScriptedModel, call


def tell(ctx: RunContext[Any], to: str, text: str) -> tuple[str, ContextUpdate]:
    """Tell another agent.

    Args:
        to: Its id.
        text: The message.
    """
    return "sent", ContextUpdate().send(to, text)


class OtherHosts:
    """Peers that hold ``elsewhere``, and note in what order and on which thread they are asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (what, id, thread name)
        self.found: set[str] = set()
        self.sent: list[SendMessage] = []

    def place(self, child: Any, loop: Any, subagent: Any) -> Any:
        return None

    def send(self, agent_id: str, message: Any) -> bool:
        return False

    def find(self, agent_ids: Sequence[str], then: Callable[[], None]) -> None:
        for agent_id in agent_ids:
            self.calls.append(("find", agent_id, threading.current_thread().name))
            if agent_id == "elsewhere":
                self.found.add(agent_id)
        then()

    def peer_exists(self, agent_id: str) -> bool:
        self.calls.append(("exists", agent_id, threading.current_thread().name))
        return agent_id in self.found

    def send_peer(self, sender: str, effect: SendMessage) -> bool:
        self.sent.append(effect)
        return True


def test_receivers_on_other_hosts_are_found_before_the_agent_checks_them() -> None:
    peers = OtherHosts()
    host = LocalHost(
        limits=TreeLimits(),
        workers=2,
        max_tool_threads=2,
        clock=system_clock,
        idle_after=None,
        default_model=None,
        peers=peers,
    )
    spec = Agent(
        "sender",
        model=ScriptedModel([[call("tell", to="elsewhere", text="hi")], "done"]),
        tools=[tell],
    )
    try:
        host.reserve("sender")
        host.spawn_root(
            spec,
            agent_id="sender",
            tool_context=None,
            metadata={},
            store=None,
            session_id=None,
            approval_handler=None,
        )
        ended: concurrent.futures.Future[Any] = concurrent.futures.Future()
        host.send("sender", StartRun("go", "run-1", HostReply(ended)))
        assert ended.result(30).output == "done"
    finally:
        host.shutdown(10)
    assert [(what, agent_id) for what, agent_id, _ in peers.calls] == [
        ("find", "elsewhere"),
        ("exists", "elsewhere"),  # in the agent's turn, answered from what find learned
    ]
    assert [(e.to, e.content) for e in peers.sent] == [("elsewhere", "hi")]
