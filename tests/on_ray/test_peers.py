"""Peer messages between agents of different hosts: order, unknown ids, crashes, durability."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Agent, AgentRef, Subagent, ToolResultMessage
from actors.ray._inputs import PeerInput
from actors.ray._mail import _PeerEntry
from actors.ray._wire import Missing, Taken
from actors.store import SQLiteStore
from actors.testing import ScriptedModel, call
from on_ray import agents

BOUND = 60.0


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path_factory.mktemp("peers") / "sessions.db") as opened:
        yield opened


@pytest.fixture(scope="module")
def runtime(ray_cluster: Any, store: SQLiteStore) -> Iterator[Any]:
    from actors.ray import RayRuntime

    with RayRuntime(hosts=2, store=store) as opened:
        yield opened


class Heard:
    """Set once an agent has logged ``count`` events of a type (seen through a subscription)."""

    def __init__(self, ref: AgentRef, count: int, kind: str = "message_received") -> None:
        self._count = count
        self._kind = kind
        self._lock = threading.Lock()
        self.event = threading.Event()
        self.unsubscribe = ref.subscribe(self._on)

    def _on(self, event: Any) -> None:
        if event.type != self._kind:
            return
        with self._lock:
            self._count -= 1
            if self._count <= 0:
                self.event.set()

    def wait(self) -> None:
        assert self.event.wait(BOUND), f"not heard within {BOUND} s"
        self.unsubscribe()


def received(ref: AgentRef) -> list[tuple[str, int, str]]:
    """What an agent logged as received: (sender, number, content), in log order."""
    return [
        (e.data["from"], e.data["n"], e.data["content"])
        for e in ref.context().events
        if e.type == "message_received"
    ]


def kill_and_wait(ray: Any, handle: Any) -> None:
    """Kill a host (Ray restarts it) and return once the restarted process answers."""
    from ray.exceptions import RayActorError

    pid = ray.get(handle.ready.remote(), timeout=BOUND)
    ray.kill(handle, no_restart=False)
    while True:  # each call waits for the host; the old one answers until it is gone
        try:
            if ray.get(handle.ready.remote(), timeout=BOUND) != pid:
                return
        except RayActorError:  # it died under the call: ask the next process
            continue


def pair(runtime: Any, name: str) -> tuple[AgentRef, AgentRef]:
    """A listener and a relay on different hosts (roots go round-robin)."""
    listener = runtime.spawn(agents.LISTENER, agent_id=f"listener-{name}")
    relay = runtime.spawn(agents.RELAY, agent_id=f"relay-{name}")
    assert runtime.host_of(listener.agent_id) != runtime.host_of(relay.agent_id)
    return listener, relay


def test_messages_reach_an_agent_of_another_host_in_the_order_sent(runtime: Any) -> None:
    listener, relay = pair(runtime, "order")
    heard = Heard(listener, 6)
    assert relay.run(f"{listener.agent_id} a|b|c", timeout=BOUND).output == "sent"
    assert relay.run(f"{listener.agent_id} d|e|f", timeout=BOUND).output == "sent"
    heard.wait()
    assert received(listener) == [
        (relay.agent_id, n, text) for n, text in enumerate("abcdef", start=1)
    ]
    transcript = [m.content for m in listener.context().messages]
    assert transcript == [f"[message from {relay.agent_id}]\n{text}" for text in "abcdef"]


def test_a_message_to_an_id_no_host_holds_is_an_error_result_and_nothing_is_sent(
    runtime: Any,
) -> None:
    relay = runtime.spawn(agents.RELAY, agent_id="relay-unknown")
    result = relay.run("nobody hello", timeout=BOUND)
    (refused,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert refused.is_error
    assert "no agent 'nobody'" in refused.content
    assert not [e for e in result.events if e.type == "message_sent"]


def test_the_senders_step_is_in_the_store_before_its_message_arrives(
    runtime: Any, store: SQLiteStore
) -> None:
    checker = runtime.spawn(agents.CHECKER, agent_id="checker", tool_context=str(store.path))
    relay = runtime.spawn(agents.RELAY, agent_id="relay-durable", session_id="relay-session")
    assert runtime.host_of(checker.agent_id) != runtime.host_of(relay.agent_id)
    checked = Heard(checker, 1, kind="turn_end")
    relay.run(f"{checker.agent_id} are you there?", timeout=BOUND)
    checked.wait()
    # The checker's tool read the sender's log from the store, on its own host, when the
    # message woke it: the send was there already.
    (found,) = [m for m in checker.context().messages if isinstance(m, ToolResultMessage)]
    assert found.content == "1"


def test_a_message_sent_while_the_receivers_host_restarts_arrives_once(
    ray_cluster: Any, runtime: Any
) -> None:
    listener, relay = pair(runtime, "receiver-dies")
    heard = Heard(listener, 1)
    relay.run(f"{listener.agent_id} one", timeout=BOUND)
    heard.wait()
    far = runtime.host_handles()[runtime.host_of(listener.agent_id)]
    kill_and_wait(ray_cluster, far)
    # Sent to a host that is down: its host sends it again until the receiver is back.
    relay.run(f"{listener.agent_id} two", timeout=BOUND)
    # A call of the driver brings the listener back from its store on the restarted host.
    again = Heard(listener, 1)
    if "two" not in [text for _, _, text in received(listener)]:
        again.wait()
    else:
        again.unsubscribe()
    assert received(listener) == [(relay.agent_id, 1, "one"), (relay.agent_id, 2, "two")]


def test_a_sender_whose_host_restarts_sends_again_and_the_receiver_logs_each_once(
    ray_cluster: Any, runtime: Any
) -> None:
    listener, relay = pair(runtime, "sender-dies")
    heard = Heard(listener, 1)
    relay.run(f"{listener.agent_id} one", timeout=BOUND)
    heard.wait()
    kill_and_wait(ray_cluster, runtime.host_handles()[runtime.host_of(relay.agent_id)])
    heard = Heard(listener, 1)
    # The relay comes back from its store (and sends "one" again as a restore does): the
    # listener drops what it heard already, and "two" comes after it.
    relay.run(f"{listener.agent_id} two", timeout=BOUND)
    heard.wait()
    assert received(listener) == [(relay.agent_id, 1, "one"), (relay.agent_id, 2, "two")]


def test_a_message_reaches_a_child_spread_to_another_host(runtime: Any) -> None:
    keeper = Agent("keeper", model=ScriptedModel(["ready"], per_agent=True), on_message="queue")
    boss = runtime.spawn(
        agents.lead(
            [Subagent(keeper, name="far", placement="spread", keep=True)],
            call("far", task="wait"),
            "done",
        ),
        agent_id="boss",
    )
    assert boss.run("go", timeout=BOUND).output == "done"
    (child,) = boss.tree().children
    home = runtime.host_of(boss.agent_id)
    # A sender on the parent's host, where the child is a stand-in for the one on its host.
    relays = [runtime.spawn(agents.RELAY, agent_id=f"relay-spread-{i}") for i in range(2)]
    (relay,) = [r for r in relays if runtime.host_of(r.agent_id) == home]
    far = runtime.ref(child.agent_id)
    assert runtime.host_of(far.agent_id) != home
    heard = Heard(far, 1)
    relay.run(f"{child.agent_id} hello", timeout=BOUND)
    heard.wait()
    assert received(far) == [(relay.agent_id, 1, "hello")]
    boss.stop()


def test_a_peer_message_goes_again_when_its_host_died_or_may_bring_its_receiver_back() -> None:
    from ray.exceptions import RayActorError  # Ray is imported only where it is installed

    def entry() -> _PeerEntry:
        return _PeerEntry(PeerInput("bob", "ann", "ann:1", 1, "hi"))

    assert entry().lost(RayActorError())  # maybe logged there: the receiver drops a 2nd copy
    assert not entry().lost(ValueError("does not pickle"))  # it never left: nothing to repeat
    assert entry().replied(Missing("bob", restarted=True))  # back when its session is
    assert not entry().replied(Missing("bob"))  # gone, as on one host: logged, not sent
    assert not entry().replied(Taken())
