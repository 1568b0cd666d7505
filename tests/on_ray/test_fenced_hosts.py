"""A host that takes a tree over fences the host before it out: that one starts nothing more.

Two agent hosts' servers run here in-process (no Ray), each with its own instance of one
store, as two lives of a host would: the first is not killed but left running, as a host
that only seems dead (paused, cut off) is.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from actors import Agent, AgentContext
from actors.exceptions import HostLostError, RunFailedError
from actors.loop._types import StartRun
from actors.ray._inbox import deliver
from actors.ray._inputs import Adopt, ChildInput, RunInput
from actors.ray._wire import Outcome, StoreRecipe, Taken, TreeSeed, WireReply
from actors.store import AgentRecord, SQLiteStore
from actors.testing import FunctionModel

from .inprocess import BOUND, closed, host_server


def test_a_run_sent_again_to_the_host_that_took_over_starts_once_and_the_old_host_is_mute(
    tmp_path: Path,
) -> None:
    asked = threading.Event()
    go_on = threading.Event()
    prompts: list[str] = []

    def reply(messages: list[Any], tools: list[Any]) -> str:
        prompts.append(str(messages[-1].content))
        asked.set()
        go_on.wait(BOUND)
        return f"answer to {messages[-1].content}"

    spec = Agent("solo", model=FunctionModel(reply))
    with SQLiteStore(tmp_path / "s.db") as store:
        seed = TreeSeed(StoreRecipe.of(store), "s1", None)
        with host_server(("h",)) as old, host_server(("h",)) as new:
            old.spawn("solo", spec, seed, {})
            run = RunInput("solo", None, "run", "hello", "first-call", False, "run-1")
            assert asyncio.run(deliver(old, [run]).answers()) == [Taken()]
            assert asked.wait(BOUND)  # the run's start is in the store (write-ahead)

            # The old host seems dead: the tree is restored on another, which fences it all.
            new.restore("s1", [spec], seed)
            # The same run, sent again (its caller could not know it had started): refused.
            again = RunInput("solo", None, "run", "hello", "second-call", False, "run-1")
            (refused,) = asyncio.run(deliver(new, [again]).answers())
            assert isinstance(refused, Outcome)
            assert isinstance(refused.error, HostLostError)
            assert "not started twice" in str(refused.error)

            # The old host goes on, fenced out: its model's answer is written nowhere.
            go_on.set()
            ended = closed(old, "first-call")
            assert isinstance(ended.error, RunFailedError)
            assert prompts == ["hello"]  # asked once, by the old host; never again

            # A new run on the new host is a run of its own.
            fresh = RunInput("solo", None, "run", "again", "third-call", False, "run-2")
            assert asyncio.run(deliver(new, [fresh]).answers()) == [Taken()]
            assert closed(new, "third-call").value.output == "answer to again"

        (stored,) = store.load("s1").agents
        events = AgentContext.deserialize(stored.context).events
        keys = [e.data.get("key") for e in events if e.type == "turn_start"]
        assert keys == ["run-1", "run-2"]
        ends = [e.data["reason"] for e in events if e.type == "turn_end"]
        assert ends == ["interrupted", "completed"]  # closed by the restore, not by the old host
        answers = [e.data for e in events if e.type == "assistant_message"]
        assert "answer to hello" not in str(answers)


def test_a_child_adopted_again_after_its_host_died_is_not_started_twice(tmp_path: Path) -> None:
    asked = threading.Event()
    go_on = threading.Event()
    prompts: list[str] = []

    def reply(messages: list[Any], tools: list[Any]) -> str:
        prompts.append(str(messages[-1].content))
        asked.set()
        go_on.wait(BOUND)
        return "done"

    spec = Agent("far", model=FunctionModel(reply))
    child = AgentContext("lead-sub-1", name="far")
    with SQLiteStore(tmp_path / "s.db") as store:
        # What the parent's host wrote before sending the child away: its record, first events.
        store.create_session("s1", root_agent_id="lead")
        store.put_agent("s1", AgentRecord("lead", None, "lead", "running"))
        store.append_events(
            "s1",
            "lead-sub-1",
            child.events,
            record=AgentRecord("lead-sub-1", "lead", "far", "idle", 1),
        )
        seed = TreeSeed(StoreRecipe.of(store), "s1", None)
        adopt = Adopt(seed, 0, spec, child.serialize(), ("lead", "lead-sub-1"), 1, 1)

        def sent(token: str) -> ChildInput:
            wire = WireReply(token, "parent", "lead", "lead-sub-1", "lead-run-1", "call-1")
            return ChildInput(adopt, "lead-sub-1", StartRun("task", ""), wire, False, False)

        with host_server(("h0", "h1")) as old, host_server(("h0", "h1")) as new:
            assert asyncio.run(deliver(old, [sent("first")]).answers()) == [Taken()]
            assert asked.wait(BOUND)  # its run started on the first host, which then "dies"
            # The same call, sent again to the host's next life: it does not start twice.
            assert asyncio.run(deliver(new, [sent("again")]).answers()) == [Taken()]
            end = closed(new, "again")
            assert isinstance(end.error, HostLostError)
            assert "not started twice" in str(end.error)
            go_on.set()
            assert prompts == ["task"]
