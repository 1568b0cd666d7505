"""A host applies a lane call's inputs in order, and answers a question with the call if it can.

The host's server runs here in-process (no Ray): what a lane's call does on the host.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Agent, AgentContext, UserMessage
from actors.loop._types import CancelRun, Steer
from actors.ray._inbox import deliver
from actors.ray._inputs import AskInput, PeerInput, RunInput, TellInput
from actors.ray._server import HostServer
from actors.ray._wire import Missing, Outcome, StoreRecipe, Taken, TreeSeed
from actors.store import SQLiteStore
from actors.testing import ScriptedModel

from .inprocess import BOUND, closed, host_server


@pytest.fixture
def server() -> Iterator[HostServer]:
    with host_server(("host-0",)) as host:
        yield host


def spawn(server: HostServer, agent_id: str, latency: float = 0) -> None:
    spec = Agent(agent_id, model=ScriptedModel(["done"], latency=latency))
    server.spawn(agent_id, spec, TreeSeed(None, None, None), {})


def test_one_call_s_inputs_reach_the_agent_in_order(server: HostServer) -> None:
    spawn(server, "a", latency=30)
    delivery = deliver(
        server,
        [
            RunInput("a", None, "run", "go", "run-key", stream=False),
            TellInput("a", None, Steer(UserMessage(content="also this"))),
            TellInput("a", None, CancelRun("enough")),
        ],
    )
    assert asyncio.run(delivery.answers()) == [Taken(), Taken(), Taken()]
    assert closed(server, "run-key").value.status == "cancelled"
    asked = deliver(server, [AskInput("a", None, "context", "ask-key")])
    (answer,) = asyncio.run(asked.answers(BOUND))
    events = [e["type"] for e in answer.value["events"]]
    assert events.index("user_message") < events.index("steered") < events.index("cancelled")


def test_a_question_answered_at_once_comes_with_the_call(server: HostServer) -> None:
    spawn(server, "quick")
    delivery = deliver(server, [AskInput("quick", None, "status", "key")])
    assert asyncio.run(delivery.answers(BOUND)) == [Outcome("idle")]
    assert "key" not in server.outboxes  # nobody will pull it


def test_a_question_its_agent_is_slow_to_answer_goes_to_the_outbox(server: HostServer) -> None:
    spawn(server, "busy")
    release = threading.Event()
    started = threading.Event()

    def hold_the_turn(event: Any) -> None:  # runs in the agent's turn
        if event.type == "turn_start":
            started.set()
            release.wait(BOUND)

    server.local.subscribe("busy", hold_the_turn)
    deliver(server, [RunInput("busy", None, "run", "go", "run-key", stream=False)])
    assert started.wait(BOUND)
    delivery = deliver(server, [AskInput("busy", None, "status", "ask-key")])
    assert asyncio.run(delivery.answers(0.01)) == [Taken()]
    release.set()
    assert closed(server, "ask-key") == Outcome("running")  # asked during the run
    assert closed(server, "run-key").value.output == "done"


def test_an_input_for_an_agent_the_host_does_not_hold_is_missing(server: HostServer) -> None:
    delivery = deliver(
        server,
        [
            TellInput("nobody", None, CancelRun()),
            RunInput("nobody", None, "run", "go", "run-key", stream=False),
            AskInput("nobody", None, "status", "ask-key"),
        ],
    )
    assert asyncio.run(delivery.answers()) == [Missing("nobody")] * 3
    assert closed(server, "run-key") == Missing("nobody")  # its reader ends too
    assert "ask-key" not in server.outboxes  # a question's is read only once taken


def test_a_run_sent_twice_runs_once(server: HostServer) -> None:
    spawn(server, "once")
    run = RunInput("once", None, "run", "go", "twice-key", stream=False)
    first = deliver(server, [run])
    # The lane's call went again: its answer was lost on the way back, not the host.
    second = deliver(server, [run])
    assert asyncio.run(first.answers()) == [Taken()]
    assert asyncio.run(second.answers()) == [Taken()]
    assert closed(server, "twice-key").value.status == "completed"
    asked = deliver(server, [AskInput("once", None, "context", "ask-key")])
    (answer,) = asyncio.run(asked.answers(BOUND))
    assert [e["type"] for e in answer.value["events"]].count("turn_start") == 1


def test_peer_messages_are_answered_once_their_receivers_logged_them(
    server: HostServer, tmp_path: Any
) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        recipe = StoreRecipe.of(store)
        for name in ("a", "b"):
            spec = Agent(name, model=ScriptedModel(["unused"]), on_message="queue")
            server.spawn(name, spec, TreeSeed(recipe, f"session-{name}", None), {})
        sent = [("a", 1), ("b", 1), ("a", 2), ("a", 1), ("nobody", 3), ("a", 3)]
        delivery = deliver(
            server, [PeerInput(to, "sender", f"sender:{n}", n, f"hi {n}") for to, n in sent]
        )
        answers = asyncio.run(delivery.answers())
        assert answers == [Taken()] * 4 + [Missing("nobody")] + [Taken()]
        # Answered means written: the store has them, in order, the repeated one once.
        (stored,) = store.load("session-a").agents
        events = AgentContext.deserialize(stored.context).events
        received = [e.data["n"] for e in events if e.type == "message_received"]
        assert received == [1, 2, 3]


def test_a_restarted_host_says_a_receiver_it_lacks_may_come_back(server: HostServer) -> None:

    server.restarted = True
    delivery = deliver(server, [PeerInput("later", "sender", "sender:1", 1, "hi")])
    assert asyncio.run(delivery.answers()) == [Missing("later", restarted=True)]
