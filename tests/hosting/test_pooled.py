"""Pooled mailboxes: agents are pykka actors without a thread each."""

from __future__ import annotations

import threading
from typing import Any

import pykka
import pytest

from actors import Agent, Runtime, UserMessage, tool
from actors.exceptions import UserError
from actors.host._messages import Query
from actors.runtime._actor import AgentActor
from actors.testing import ScriptedModel, call

BOUND = 30.0


def _idle(name: str = "a") -> Agent[Any]:
    return Agent(name, model=ScriptedModel(["ok"], per_agent=True))


@pytest.mark.timeout(120)
def test_twenty_thousand_agents_live_on_a_bounded_number_of_threads() -> None:
    threads_before = threading.active_count()
    with Runtime(workers=4) as rt:
        refs = [rt.spawn(_idle()) for _ in range(20_000)]
        assert rt.live_agents() == 20_000
        # Workers, the effects loop and nothing per agent.
        assert threading.active_count() - threads_before <= 4 + 2
        assert refs[-1].run("hi", timeout=BOUND).output == "ok"
        assert refs[0].run("hi", timeout=BOUND).output == "ok"
        assert threading.active_count() - threads_before <= 4 + 2
    assert rt.live_agents() == 0


def test_agents_stay_pykka_actors_in_the_registry() -> None:
    with Runtime() as rt:
        ref = rt.spawn(_idle())
        actors = pykka.ActorRegistry.get_by_class(AgentActor)
        assert len(actors) == 1
        assert actors[0].ask(Query("status"), timeout=BOUND) == "idle"
        assert ref.status == "idle"
    assert pykka.ActorRegistry.get_by_class(AgentActor) == []


def test_one_flooded_agent_does_not_starve_another() -> None:
    gate = threading.Event()
    with Runtime(workers=1) as rt:
        flooded = rt.spawn(_idle("flooded"))
        other = rt.spawn(_idle("other"))
        # Hold the only worker inside the flooded agent's turn while its mail piles up.
        flooded.subscribe(lambda event: gate.wait(BOUND))
        flooded.send("hold the worker")
        actor = rt._host.nodes[flooded.agent_id].ref
        for _ in range(20_000):  # no replies: they only occupy the flooded agent's turns
            actor.tell(Query("status"))
        left: list[int] = []
        future = other.run_async("hi")
        # Read on the worker as the run ends: nothing else runs then.
        future.add_done_callback(lambda _: left.append(len(actor.actor_inbox._items)))
        gate.set()
        assert future.result(BOUND).output == "ok"
    # The other agent finished while the flooded one still had almost all its mail to read.
    assert left[0] > 19_000


def test_messages_to_one_agent_are_handled_in_the_order_they_were_sent() -> None:
    with Runtime(workers=3) as rt:
        ref = rt.spawn(_idle())
        for i in range(500):
            ref.send(f"m{i}")
        contents = [m.content for m in ref.context().messages if isinstance(m, UserMessage)]
    assert contents == [f"m{i}" for i in range(500)]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"workers": 0}, "workers"),
        ({"workers": True}, "workers"),
        ({"max_tool_threads": 0}, "max_tool_threads"),
        ({"idle_after": -1}, "idle_after"),
        ({"idle_after": "soon"}, "idle_after"),
    ],
)
def test_bad_runtime_settings_are_refused_clearly(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        Runtime(**kwargs)


def test_a_busy_tree_spread_over_workers_gives_each_its_answer() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: Anything.
        """
        return text

    agent = Agent(
        "e", model=ScriptedModel([call("echo", text="x"), "done"], per_agent=True), tools=[echo]
    )
    with Runtime(workers=2) as rt:
        futures = [rt.spawn(agent).run_async("go") for _ in range(200)]
        outputs = {f.result(BOUND).output for f in futures}
    assert outputs == {"done"}


def test_ids_from_a_spec_name_are_never_given_twice() -> None:
    with Runtime() as rt:
        first = rt.spawn(_idle())
        first.stop()
        second = rt.spawn(_idle())
        assert (first.agent_id, second.agent_id) == ("a", "a-2")
        assert first.status == "stopped"
        with pytest.raises(Exception, match="not running"):
            first.run("hi")
