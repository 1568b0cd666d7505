"""Agent specs, tools and factories of the Ray tests: importable, so hosts load them by name."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from actors import (
    Agent,
    AgentContext,
    ContextUpdate,
    Pending,
    Request,
    RunContext,
    Subagent,
    ToolResultMessage,
    tool,
)
from actors.store import SQLiteStore
from actors.testing import FunctionModel, ScriptedModel, call

_NEVER = threading.Event()


def where() -> int:
    """The process this tool runs in."""
    return os.getpid()


LATCH = "latch"
LATCH_NAMESPACE = "actors-tests"


class Latch:
    """A Ray actor a test waits on until a tool has started (its call is in the store)."""

    def __init__(self) -> None:
        import asyncio

        self._started = asyncio.Event()

    async def started(self) -> None:
        self._started.set()

    async def wait(self) -> None:
        await self._started.wait()


class Gate:
    """A Ray actor that hands values back only once it is opened.

    A call whose argument is ``gate.hold.remote(value)`` waits for the gate: Ray sends the
    calls made after it to their actor first (an async actor takes calls as they come).
    """

    def __init__(self) -> None:
        import asyncio

        self._opened = asyncio.Event()

    async def hold(self, value: Any) -> Any:
        await self._opened.wait()
        return value

    async def open(self) -> None:
        self._opened.set()


def _signal_latch() -> None:
    import ray

    try:
        latch = ray.get_actor(LATCH, namespace=LATCH_NAMESPACE)
    except ValueError:
        return
    latch.started.remote()


async def linger() -> str:
    """Tell the test's latch that it runs, then wait (cancellably) for a minute."""
    import asyncio

    _signal_latch()
    await asyncio.sleep(60)
    return "lingered"


def hang() -> str:
    """Tell the test's latch (if there is one) that it runs, then wait for what never comes."""
    _signal_latch()
    _NEVER.wait(120)
    return "never"


@tool
def whose(ctx: RunContext) -> str:  # type: ignore[type-arg]
    """What the tool context is on this host."""
    return str(ctx.tool_context)


@tool
def ask(ctx: RunContext, question: str) -> Any:  # type: ignore[type-arg]
    """Ask the host and wait for its answer.

    Args:
        question: What to ask.
    """
    if ctx.answer is None:
        return Pending(Request(kind="input", prompt=question))
    return f"{question} -> {ctx.answer.data}"


@dataclass(frozen=True)
class Settings:
    """What a caller gives as tool_context: plain values."""

    db_url: str


def host_context(settings: Settings | None) -> str | None:
    """The tool_context_factory of the tests: what a host builds from the settings."""
    if settings is None:
        return None
    return f"connected to {settings.db_url} in {os.getpid()}"


def worker(*replies: Any, tools: tuple[Any, ...] = (where,)) -> Agent[str]:
    return Agent("worker", model=ScriptedModel(list(replies), per_agent=True), tools=list(tools))


def lead(subagents: list[Subagent], *replies: Any) -> Agent[str]:
    return Agent("lead", model=ScriptedModel(list(replies), per_agent=True), subagents=subagents)


# A lead that calls one worker next to it and one spread to another host; each says its pid.
PIDS_WORKER = worker(call("where"), "ok")
PIDS_LEAD = Agent(
    "lead",
    model=ScriptedModel(
        [
            [call("near", task="where are you"), call("far", task="where are you")],
            call("where"),
            "done",
        ],
        per_agent=True,
    ),
    tools=[where],
    subagents=[
        Subagent(PIDS_WORKER, name="near"),
        Subagent(PIDS_WORKER, name="far", placement="spread"),
    ],
)


def _say_where(messages: list[Any], tools: list[Any]) -> Any:
    """A model that calls `where`, then answers with its result."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return last.content
    return call("where")


HELPER = Agent("helper", model=FunctionModel(_say_where), tools=[where])


@tool
def delegate_one(ctx: RunContext) -> str:  # type: ignore[type-arg]
    """Hand a task to a helper; say where this tool and the helper ran."""
    helper_pid = ctx.delegate(HELPER, "help", timeout=30)
    return f"{os.getpid()}/{helper_pid}"


DELEGATING_LEAD = Agent(
    "boss", model=ScriptedModel([call("delegate_one"), "done"]), tools=[delegate_one]
)


def narrow(context: Any) -> str:
    """A Subagent's tool_context function: what the child gets of its parent's."""
    return f"narrowed({context})"


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch something that needs a human's yes.

    Args:
        target: What to launch.
    """
    return f"launched {target}"


def approve_launches(request: Request) -> bool:
    """An in-process approval handler: yes to launches of 'probe', no to anything else."""
    return request.data.get("arguments", {}).get("target") == "probe"


# -- peer messages between hosts ----------------------------------------------------------------


def tell(ctx: RunContext, to: str, text: str) -> tuple[str, Any]:  # type: ignore[type-arg]
    """Send a peer message.

    Args:
        to: The receiver's id.
        text: What to say.
    """
    return "sent", ContextUpdate().send(to, text)


def _relay(messages: list[Any], tools: list[Any]) -> Any:
    """A model that sends ``"<to> <text>|<text>..."`` as one message per text, in order.

    It reads its order from the prompt (no script to lose when its host restarts).
    """
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return "sent"
    to, _, texts = str(last.content).partition(" ")
    return [call("tell", to=to, text=text) for text in texts.split("|")]


RELAY = Agent("relay", model=FunctionModel(_relay), tools=[tell])
LISTENER = Agent("listener", model=ScriptedModel(["unused"]), on_message="queue")


def sends_logged(ctx: RunContext, session_id: str) -> str:  # type: ignore[type-arg]
    """How many peer messages the store holds as sent in a session (read from this process).

    Args:
        session_id: The sender's session.
    """
    with SQLiteStore(ctx.tool_context) as store:
        stored = store.load(session_id)
    return str(
        sum(
            event.type == "message_sent"
            for entry in stored.agents
            for event in AgentContext.deserialize(entry.context).events
        )
    )


def _check_sender(messages: list[Any], tools: list[Any]) -> Any:
    """On a message, look in the store for its sender's log of it; then say what it found."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return last.content
    return call("sends_logged", session_id="relay-session")


CHECKER = Agent("checker", model=FunctionModel(_check_sender), tools=[sends_logged])


# -- exactly once: a fan-out with peer traffic while hosts are killed ----------------------------

FANOUT_NAMESPACE = "actors-tests-fanout"


class Rendezvous:
    """A Ray actor: tools arrive (the test waits for ``count`` of them), then wait for ``open``."""

    def __init__(self) -> None:
        import asyncio

        self._arrived: list[str] = []
        self._changed = asyncio.Condition()
        self._opened = asyncio.Event()

    async def arrive(self, who: str) -> None:
        async with self._changed:
            self._arrived.append(who)
            self._changed.notify_all()

    async def wait_for(self, count: int) -> list[str]:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._arrived) >= count)
            return list(self._arrived)

    async def passed(self) -> None:
        await self._opened.wait()

    async def open(self) -> None:
        self._opened.set()


class Tally:
    """A Ray actor that counts the model calls of the fan-out's children, by (task, step)."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, int], int] = {}

    def note(self, task: str, step: int) -> None:
        self.calls[(task, step)] = self.calls.get((task, step), 0) + 1

    def seen(self) -> dict[tuple[str, int], int]:
        return dict(self.calls)


def pause(rendezvous: str, task: str) -> str:
    """Arrive at the test's rendezvous, then wait until the test opens it.

    Args:
        rendezvous: The Ray actor's name.
        task: Who arrives.
    """
    import ray

    meeting = ray.get_actor(rendezvous, namespace=FANOUT_NAMESPACE)
    ray.get(meeting.arrive.remote(task), timeout=60)
    ray.get(meeting.passed.remote(), timeout=60)
    return "passed"


def _fan_child(messages: list[Any], tools: list[Any]) -> Any:
    """Tell the listener twice (one step), pause at the rendezvous, then say it finished.

    The prompt is ``"<listener>|<rendezvous>|<task>"``; each model call is counted by the
    test's `Tally` (a call made twice would be a run started twice).
    """
    import ray

    prompt = next(m for m in messages if m.role == "user")
    listener, rendezvous, task = str(prompt.content).split("|")
    step = sum(1 for m in messages if m.role == "assistant")
    ray.get_actor("tally", namespace=FANOUT_NAMESPACE).note.remote(task, step)
    if step == 0:
        return [call("tell", to=listener, text=f"{task}/{part}") for part in "ab"]
    if step == 1:
        return call("pause", rendezvous=rendezvous, task=task)
    return f"finished {task}"


FAN_CHILD = Agent(
    "fan-child", model=FunctionModel(_fan_child), tools=[tell, pause], tool_timeout=60
)


def _fan_lead(messages: list[Any], tools: list[Any]) -> Any:
    """Fan ``n`` tasks out to spread children (prompt ``"<round>|<listener>|<rendezvous>|<n>"``)."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return "done"
    name, listener, rendezvous, count = str(last.content).split("|")
    return [call("w", task=f"{listener}|{rendezvous}|{name}-{i}") for i in range(int(count))]


FAN_LEAD = Agent(
    "fan-lead",
    model=FunctionModel(_fan_lead),
    subagents=[Subagent(FAN_CHILD, name="w", placement="spread", timeout=60)],
)
