"""The conformance suite of hosts: the behaviours every host of agent loops must share.

Subclass `HostConformance` in a test module, say how to open a host, and pytest runs every
test of the suite against it::

    from contextlib import contextmanager
    from actors import Runtime
    from actors.host.conformance import HostConformance

    class TestRuntime(HostConformance):
        @contextmanager
        def open_host(self, tmp_path):
            with Runtime() as runtime:
                yield runtime

A host is anything with ``spawn(agent, *, tool_context=..., metadata=...)`` returning a handle
with the `AgentRef` API (``run``, ``resume``, ``cancel``, ``tree``, ``subscribe``): `Runtime`,
`Simulation` and `RayRuntime` are used as they are; a host without that face (`SyncDriver`)
is wrapped by its test module. What not every host can do comes in mixins that a host adds
when it can: `PeerConformance` (peer messages between any two roots),
`PersistenceConformance` (a store; restore in another host, ``make_store``) and
`PassivationConformance` (idle sessions sleep in the store). Hosts that hand control back
before a woken agent has finished say how to wait for it (`settle`).

The suite needs pytest (it is not imported by `actors.host` itself). Its tools, models and
agents live at module level so that a host in another process (Ray) can import them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from actors.context._messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from actors.context._parts import DocumentPart, ImagePart, TextPart
from actors.context._run_context import RunContext
from actors.context._suspension import Answer, Pending, Request
from actors.context._update import ContextUpdate
from actors.context._usage import Usage
from actors.loop._agent import Agent
from actors.loop._compaction import Compaction
from actors.loop._tools import tool
from actors.models._model import ModelRequest, ModelResponse, ToolDefinition
from actors.models._test_models import FunctionModel, ScriptedModel, call
from actors.models._tokens import estimate_tokens

__all__ = [
    "Deps",
    "HostConformance",
    "PassivationConformance",
    "PeerConformance",
    "PersistenceConformance",
]


@dataclasses.dataclass(frozen=True)
class Deps:
    """The static channel the suite's roots get (compared by value: Ray copies it)."""

    token: str


SECRET = "conformance-secret-3f9a"
DEPS = Deps(SECRET)


def _plain(value: Any) -> Any:
    """The plain JSON a read-only metadata view stands for."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@tool
def remember(ctx: RunContext[Any], key: str, value: str) -> tuple[str, ContextUpdate]:
    """Keep a value in this agent's metadata.

    Args:
        ctx: The run context.
        key: Where.
        value: What.
    """
    return "kept", ContextUpdate().set(key, value)


@tool
def report(ctx: RunContext[Any]) -> str:
    """Say what this agent sees: its metadata and whether its tool_context is the root's."""
    seen = {"metadata": _plain(ctx.metadata), "deps": ctx.tool_context == DEPS}
    return json.dumps(seen, sort_keys=True)


def _report_then_echo(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Any:
    """Call `report`, then answer with what it returned (a child that tells what it saw)."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return last.content
    return ToolCall(id=f"report-{len(messages)}", name="report", arguments={})


ECHO = Agent(
    "echo",
    model=FunctionModel(_report_then_echo, name="echo"),
    tools=[report],
    description="Reports what it sees.",
)
"""A child that answers with its metadata snapshot and whether it got the root's tool_context."""


def _task_echo(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Any:
    """Answer with the task (the last user message)."""
    for message in reversed(messages):
        if message.role == "user":
            return f"did {message.content}"
    return "did nothing"


WORKER = Agent("worker", model=FunctionModel(_task_echo, name="worker"), description="Works.")


@tool(sequential=True)
def bump_and_delegate(ctx: RunContext[Any]) -> tuple[str, ContextUpdate]:
    """Ask the echo child what it sees, then count one more in ``n``."""
    seen = ctx.delegate(ECHO, "what do you see?", timeout=60)
    return str(seen), ContextUpdate().set("n", int(ctx.metadata.get("n", 0)) + 1)


@tool
def ask_human(ctx: RunContext[Any], question: str) -> Any:
    """Ask the host, and wait for its answer.

    Args:
        ctx: The run context (its ``answer`` is set when resumed).
        question: What to ask.
    """
    if ctx.answer is None:
        return Pending(Request(prompt=question))
    return f"the human said {ctx.answer.data}"


@tool
def tell(ctx: RunContext[Any], to: str, text: str) -> tuple[str, ContextUpdate]:
    """Send a peer message.

    Args:
        ctx: The run context.
        to: The receiver's id.
        text: What to say.
    """
    return "sent", ContextUpdate().send(to, text)


# A 1x1 PNG and a tiny PDF: real formats, so the door's checks of the bytes pass.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
PDF = b"%PDF-1.4\n1 0 obj<</Type/Page>>endobj\n%%EOF\n"


@tool
def screenshot(ctx: RunContext[Any]) -> Any:
    """Return a screenshot (an image part) with a caption."""
    return ["the screen", ImagePart(data=PNG, media_type="image/png", name="screen.png")]


@tool
def tell_with_image(ctx: RunContext[Any], to: str) -> tuple[str, ContextUpdate]:
    """Send a peer message holding text and an image.

    Args:
        ctx: The run context.
        to: The receiver's id.
    """
    return "sent", ContextUpdate().send(
        to, ["see this", ImagePart(data=PNG, media_type="image/png")]
    )


def _binary_seen(messages: Sequence[Message]) -> list[list[str]]:
    """Per message with parts: each part as ``kind:media_type:sha256`` (text parts as text)."""
    seen = []
    for message in messages:
        content = getattr(message, "content", "")
        if isinstance(content, tuple):
            seen.append(
                [
                    f"text:{part.text}"
                    if isinstance(part, TextPart)
                    else f"{part.type}:{part.media_type}:{hashlib.sha256(part.bytes).hexdigest()}"
                    for part in content
                ]
            )
    return seen


def _look_then_answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Any:
    """Take a screenshot, then answer with every part the model was shown (as JSON)."""
    if not isinstance(messages[-1], ToolResultMessage):
        return ToolCall(id=f"shot-{len(messages)}", name="screenshot", arguments={})
    return json.dumps(_binary_seen(messages))


def _terse(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> ModelResponse:
    """Answer "ok", a summary request with a summary; reporting the estimate as its count."""
    summary = messages[0].role == "system" and "Summarise" in messages[-1].text
    request = ModelRequest(messages=tuple(messages), tools=tuple(tools))
    usage = Usage(requests=1, input_tokens=estimate_tokens(request), output_tokens=1)
    text = "summary of the earlier turns" if summary else "ok"
    return ModelResponse(AssistantMessage(content=text), usage)


WINDOW = 300

COMPACTING = Agent(
    "compacting",
    model=FunctionModel(_terse, name="terse"),
    system_prompt="You are terse.",
    context_window=WINDOW,
    compaction=Compaction(at=0.8, keep_last_turns=2),
)
"""An agent whose 300-token window holds a dozen short turns: it compacts as it goes."""


def _results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def _events_text(events: Sequence[Any]) -> str:
    return json.dumps([(e.type, e.data) for e in events], default=str)


class HostConformance:
    """Tests every host must pass. Subclass it and implement `open_host`.

    The test class's name must start with ``Test`` for pytest to collect it.
    """

    def open_host(self, tmp_path: Path) -> AbstractContextManager[Any]:
        """A context manager yielding a fresh host (closed at its exit)."""
        raise NotImplementedError

    def settle(self, host: Any, done: threading.Event) -> None:
        """Let the host work until ``done`` is set (by an agent's event, say).

        The default waits (bounded) for hosts that run agents on threads of their own; a host
        that runs only when driven (a `Simulation`) drives itself here instead.
        """
        assert done.wait(30), "the host never got there"

    @pytest.fixture
    def host_ready(self) -> None:
        """What the host needs before one opens (a cluster, say): override it with fixtures."""

    @pytest.fixture
    def host(self, tmp_path: Path, host_ready: None) -> Iterator[Any]:
        """A fresh host for one test."""
        with self.open_host(tmp_path) as opened:
            yield opened

    # -- the two channels -----------------------------------------------------------------

    def test_a_subagent_gets_the_roots_tool_context_and_a_snapshot_of_metadata(
        self, host: Any
    ) -> None:
        """The child sees the tool_context unchanged and the metadata of its call, not later."""
        root = Agent(
            "root",
            model=ScriptedModel(
                [
                    call("remember", key="topic", value="tea"),
                    [call("echo", task="look"), call("remember", key="later", value="x")],
                    "root done",
                ]
            ),
            tools=[remember],
            subagents=[ECHO],
        )
        ref = host.spawn(root, tool_context=DEPS, metadata={"user": {"name": "ada"}})
        result = ref.run("go")
        assert result.status == "completed"
        child_said = json.loads(_results(result.messages)[1].text)
        # The snapshot was taken when the parent's tool was called: the earlier step's update
        # is in it, the sibling call's update of the same step is not.
        assert child_said == {
            "deps": True,
            "metadata": {"topic": "tea", "user": {"name": "ada"}},
        }
        assert _plain(result.metadata) == {"later": "x", "topic": "tea", "user": {"name": "ada"}}
        assert SECRET not in _events_text(result.events)

    def test_a_childs_changes_never_reach_the_parents_metadata(self, host: Any) -> None:
        """Nothing merges back from a child except through its result."""
        keeper = Agent(
            "keeper",
            model=ScriptedModel([call("remember", key="mine", value="child"), "kept it"]),
            tools=[remember],
            description="Keeps a value.",
        )
        root = Agent(
            "root",
            model=ScriptedModel([call("keeper", task="keep"), "root done"]),
            subagents=[keeper],
        )
        result = host.spawn(root, tool_context=DEPS, metadata={"shared": 1}).run("go")
        assert _plain(result.metadata) == {"shared": 1}
        assert [m.content for m in _results(result.messages)] == ["kept it"]

    def test_a_delegated_child_gets_the_snapshot_of_the_calling_tool(self, host: Any) -> None:
        """``ctx.delegate`` hands the child the tool's own snapshot, never the live metadata.

        A sequential tool's second call sees the first call's update in its snapshot while the
        agent's live metadata does not have it yet (updates are applied after the step).
        """
        root = Agent(
            "root",
            model=ScriptedModel(
                [[call("bump_and_delegate"), call("bump_and_delegate")], "root done"]
            ),
            tools=[bump_and_delegate],
        )
        result = host.spawn(root, tool_context=DEPS).run("go")
        assert result.status == "completed"
        seen = [json.loads(m.text)["metadata"] for m in _results(result.messages)]
        assert seen == [{}, {"n": 1}]
        assert _plain(result.metadata) == {"n": 2}

    # -- fan-out --------------------------------------------------------------------------

    def test_parallel_subagent_results_come_back_in_call_order(self, host: Any) -> None:
        """A fan-out's results are the tool results of its calls, in the order of the calls."""
        tasks = ["alpha", "beta", "gamma", "delta"]
        root = Agent(
            "root",
            model=ScriptedModel([[call("worker", task=t) for t in tasks], "root done"]),
            subagents=[WORKER],
        )
        result = host.spawn(root, tool_context=DEPS).run("go")
        assert [m.content for m in _results(result.messages)] == [f"did {t}" for t in tasks]
        spawned = [e.data["child_id"] for e in result.events if e.type == "subagent_spawned"]
        assert spawned == [f"root-sub-{n}" for n in range(1, len(tasks) + 1)]

    # -- suspension and cancel ------------------------------------------------------------

    @staticmethod
    def _three_levels() -> Agent[Any]:
        leaf = Agent(
            "leaf",
            model=ScriptedModel(
                [call("ask_human", question="budget?"), "leaf: noted"], per_agent=True
            ),
            tools=[ask_human],
            description="Asks.",
        )
        mid = Agent(
            "mid",
            model=ScriptedModel([call("leaf", task="get budget"), "mid done"], per_agent=True),
            subagents=[leaf],
            description="Delegates.",
        )
        return Agent(
            "root",
            model=ScriptedModel([call("mid", task="plan"), "root done"], per_agent=True),
            subagents=[mid],
        )

    def test_a_request_at_depth_surfaces_at_the_root_and_is_answered_there(self, host: Any) -> None:
        """A grandchild's request reaches the host with its path; the answer resumes the tree."""
        ref = host.spawn(self._three_levels(), tool_context=DEPS)
        suspended = ref.run("go")
        assert suspended.status == "suspended"
        (request,) = suspended.requests
        assert request.path == ("root", "root-sub-1", "root-sub-1-sub-1")
        assert request.prompt == "budget?"
        statuses = {node.agent_id: node.status for node in ref.tree().walk()}
        assert statuses == dict.fromkeys(request.path, "suspended")

        result = ref.resume({request.id: Answer(data=5000)})
        assert result.status == "completed"
        assert result.output == "root done"
        assert [m.content for m in _results(result.messages)] == ["mid done"]

    def test_parts_reach_the_model_intact(self, host: Any) -> None:
        """A prompt of text, an image and a PDF, and a tool's image result: the model gets them."""
        looker = Agent(
            "looker", model=FunctionModel(_look_then_answer, name="looker"), tools=[screenshot]
        )
        prompt = [
            "what is on these?",
            ImagePart(data=PNG, media_type="image/png"),
            DocumentPart(data=PDF, media_type="application/pdf", name="a.pdf"),
        ]
        result = host.spawn(looker, tool_context=DEPS).run(prompt)
        png, pdf = hashlib.sha256(PNG).hexdigest(), hashlib.sha256(PDF).hexdigest()
        assert json.loads(result.output) == [
            ["text:what is on these?", f"image:image/png:{png}", f"document:application/pdf:{pdf}"],
            ["text:the screen", f"image:image/png:{png}"],
        ]
        assert _binary_seen(result.messages) == json.loads(result.output)

    def test_a_long_session_compacts_and_no_request_passes_the_window(self, host: Any) -> None:
        """Thirty turns in a 300-token window: compacted, every request under 80 %, log whole."""
        ref = host.spawn(COMPACTING, tool_context=DEPS)
        prompts = [f"turn {n}: " + "x" * 60 for n in range(30)]
        for text in prompts:
            assert ref.run(text).output == "ok"
        ctx = ref.context()
        assert [e for e in ctx.events if e.type == "compacted"]
        counted = [e.data["tokens"] for e in ctx.events if e.type == "request_header"]
        assert counted
        assert max(counted) <= int(WINDOW * 0.8)
        logged = [e.data["content"] for e in ctx.events if e.type == "user_message"]
        assert [text for text in logged if text.startswith("turn ")] == prompts
        assert ctx.messages[0].role == "system"
        assert ctx.messages[-2].text == prompts[-1]

    def test_cancel_reaches_every_descendant(self, host: Any) -> None:
        """Cancelling a root whose tree waits deep down cancels the tree, and the root says so."""
        ref = host.spawn(self._three_levels(), tool_context=DEPS)
        suspended = ref.run("go")
        assert suspended.status == "suspended"
        cancelled = threading.Event()
        ref.subscribe(lambda event: cancelled.set() if event.type == "cancelled" else None)
        ref.cancel("no longer needed")
        self.settle(host, cancelled)
        kinds = [e.type for e in ref.context().events]
        assert "cancelled" in kinds[-3:], kinds[-6:]
        # The root ends first; its descendants take their cancel as messages of their own.
        self._await_cancelled(host, ref)
        remaining = {n.agent_id: n.status for n in ref.tree().walk() if n.agent_id != ref.agent_id}
        assert all(status in ("cancelled", "stopped") for status in remaining.values()), remaining

    def _await_cancelled(self, host: Any, ref: Any) -> None:
        """Wait for every descendant of ``ref`` still running or suspended to log its cancel."""
        final = ("cancelled", "stopped")

        def open_ones() -> set[str]:
            return {
                n.agent_id
                for n in ref.tree().walk()
                if n.agent_id != ref.agent_id and n.status not in final
            }

        waiting = open_ones()
        if not waiting or not hasattr(host, "ref"):
            return
        seen: set[str] = set()
        lock, done = threading.Lock(), threading.Event()

        def watch(agent_id: str) -> Any:
            def on_event(event: Any) -> None:
                if event.type == "cancelled":
                    with lock:
                        seen.add(agent_id)
                        if waiting <= seen:
                            done.set()

            return on_event

        stops = [host.ref(agent_id).subscribe(watch(agent_id)) for agent_id in waiting]
        try:
            with lock:  # what ended before the subscriptions is read from the tree
                waiting &= open_ones()
                if waiting <= seen:
                    done.set()
            self.settle(host, done)
        finally:
            for stop in stops:
                stop()


class PeerConformance(HostConformance):
    """Peer messages between any two roots of a host (add it to a host that carries them)."""

    # -- peers ------------------------------------------------------------------------------

    def test_a_peer_message_wakes_an_idle_receiver(self, host: Any) -> None:
        """A message sent by one root's tool starts a turn of an idle root, which answers."""
        bob = host.spawn(Agent("bob", model=ScriptedModel(["got it"])), tool_context=DEPS)
        ended = threading.Event()
        bob.subscribe(lambda event: ended.set() if event.type == "turn_end" else None)
        sender = Agent(
            "sender",
            model=ScriptedModel([call("tell", to=bob.agent_id, text="hi bob"), "sent it"]),
            tools=[tell],
        )
        result = host.spawn(sender, tool_context=DEPS).run("go")
        assert result.output == "sent it"
        self.settle(host, ended)
        received = [e.data for e in bob.context().events if e.type == "message_received"]
        assert [(r["from"], r["content"]) for r in received] == [("sender", "hi bob")]
        assert isinstance(bob.context().messages[-1], AssistantMessage)
        assert bob.context().messages[-1].content == "got it"

    def test_a_peer_message_carries_parts(self, host: Any) -> None:
        """Text and an image sent by one root reach the other's transcript as parts."""
        bob = host.spawn(Agent("bob", model=ScriptedModel(["seen"])), tool_context=DEPS)
        ended = threading.Event()
        bob.subscribe(lambda event: ended.set() if event.type == "turn_end" else None)
        sender = Agent(
            "sender",
            model=ScriptedModel([call("tell_with_image", to=bob.agent_id), "sent it"]),
            tools=[tell_with_image],
        )
        assert host.spawn(sender, tool_context=DEPS).run("go").output == "sent it"
        self.settle(host, ended)
        png = hashlib.sha256(PNG).hexdigest()
        assert _binary_seen(bob.context().messages) == [
            ["text:[message from sender]", "text:see this", f"image:image/png:{png}"]
        ]


class PersistenceConformance(HostConformance):
    """Sessions in a store, restored by another host (add it to a host that keeps a store)."""

    def make_store(self, tmp_path: Path) -> Any:
        """A store the host persists sessions in (shared by the hosts of one test)."""
        raise NotImplementedError

    def test_a_suspended_tree_is_restored_by_another_host_and_answered(
        self, tmp_path: Path, host_ready: None
    ) -> None:
        """A session left suspended at depth comes back in a new host, where its answer lands."""
        store = self.make_store(tmp_path)
        with self.open_host(tmp_path) as first:
            ref = first.open_session(
                self._three_levels(), session_id="s1", store=store, tool_context=DEPS
            )
            (request,) = ref.run("go").requests
        with self.open_host(tmp_path) as second:
            restored = second.restore(
                "s1", store=store, agents=[self._three_levels()], tool_context=DEPS
            )
            result = restored.resume({request.id: Answer(data=5000)})
            assert (result.status, result.output) == ("completed", "root done")
            assert [m.content for m in _results(result.messages)] == ["mid done"]

    def test_a_restored_session_goes_on_compacting(self, tmp_path: Path, host_ready: None) -> None:
        """Compacted in one host, restored in another: it compacts again, inside its window."""
        store = self.make_store(tmp_path)
        with self.open_host(tmp_path) as first:
            ref = first.open_session(COMPACTING, session_id="s4", store=store, tool_context=DEPS)
            for n in range(20):
                ref.run(f"turn {n}: " + "x" * 60)
            before = sum(e.type == "compacted" for e in ref.context().events)
        with self.open_host(tmp_path) as second:
            restored = second.restore("s4", store=store, agents=[COMPACTING], tool_context=DEPS)
            for n in range(20, 40):
                assert restored.run(f"turn {n}: " + "x" * 60).output == "ok"
            events = restored.context().events
        assert before >= 1
        assert sum(e.type == "compacted" for e in events) > before
        counted = [e.data["tokens"] for e in events if e.type == "request_header"]
        assert max(counted) <= int(WINDOW * 0.8)

    def test_parts_survive_a_restore(self, tmp_path: Path, host_ready: None) -> None:
        """A session whose transcript holds images is restored with every byte of them."""
        store = self.make_store(tmp_path)
        spec = Agent(
            "looker", model=FunctionModel(_look_then_answer, name="looker"), tools=[screenshot]
        )
        prompt = ["look", ImagePart(data=PNG, media_type="image/png")]
        with self.open_host(tmp_path) as first:
            ref = first.open_session(spec, session_id="s3", store=store, tool_context=DEPS)
            seen = ref.run(prompt).output
        with self.open_host(tmp_path) as second:
            restored = second.restore("s3", store=store, agents=[spec], tool_context=DEPS)
            assert json.dumps(_binary_seen(restored.context().messages)) == seen


class PassivationConformance(PersistenceConformance):
    """Idle sessions put to sleep in the store (add it to a host that passivates)."""

    def test_a_passivated_session_wakes_on_its_next_run_with_its_state(
        self, tmp_path: Path, host_ready: None
    ) -> None:
        """Put to sleep in the store, a session wakes on a run with its transcript and metadata."""
        store = self.make_store(tmp_path)
        spec = Agent(
            "keeper",
            model=ScriptedModel(
                [call("remember", key="topic", value="tea"), "kept", "still here"], per_agent=True
            ),
            tools=[remember],
        )
        with self.open_host(tmp_path) as host:
            ref = host.open_session(spec, session_id="s2", store=store, tool_context=DEPS)
            assert ref.run("keep it").output == "kept"
            assert ref.passivate() is True
            again = ref.run("still there?")
            assert again.output == "still here"
            assert _plain(again.metadata) == {"topic": "tea"}
            prompts = [m.content for m in again.messages if m.role == "user"]
            assert prompts == ["keep it", "still there?"]
