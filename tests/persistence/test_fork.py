"""Fork and rewind: a tree cut at a root event comes up without running anything again."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, Answer, Pending, Request, RunContext, Runtime, Subagent, tool
from actors.context._messages import Message
from actors.exceptions import AgentDefinitionError, UserError
from actors.loop._recovery import OUTCOME_UNKNOWN
from actors.store import MemoryStore, PostgresStore, SessionStore, SQLiteStore
from actors.testing import FunctionModel, ScriptedModel, call


@tool
def ask(ctx: RunContext[Any], question: str) -> str:
    """Ask the host.

    Args:
        question: What to ask.
    """
    if ctx.answer is None:
        return Pending(Request(kind="input", prompt=question))  # type: ignore[return-value]
    return f"answer: {ctx.answer.data}"


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "sessions.sqlite") as sqlite:
            yield sqlite
    elif request.param == "postgres":  # skipped without a server (see tests/conftest.py)
        dsn = request.getfixturevalue("postgres_dsn")
        with PostgresStore(dsn, schema=f"t_{secrets.token_hex(6)}") as postgres:
            yield postgres
    else:
        with MemoryStore() as memory:
            yield memory


def _seq_of(store: SessionStore, session_id: str, agent_id: str, kind: str, nth: int = 0) -> int:
    seqs = [e["seq"] for e in store.read_events(session_id, agent_id) if e["type"] == kind]
    return int(seqs[nth])


def _texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, str(m.content)) for m in messages if m.role in ("user", "assistant")]


def test_a_fork_makes_no_model_request_before_the_cut(store: SessionStore) -> None:
    """Two turns, forked after the first: the fork's next turn is its only model request."""
    seen: list[list[Message]] = []

    def reply(messages: list[Message], tools: Any) -> str:
        seen.append(list(messages))
        return f"re: {messages[-1].content}"

    model = FunctionModel(reply)
    agent = Agent("chat", model=model)
    with Runtime() as runtime:
        ref = runtime.spawn(agent, store=store, session_id="s1")
        ref.run("one", timeout=10)
        ref.run("two", timeout=10)
        before = store.read_events("s1", ref.agent_id)
        at = _seq_of(store, "s1", ref.agent_id, "turn_end", 0)
        seen.clear()
        fork = runtime.fork("s1", at=at, store=store, agents=[agent], new_id="f1")
        assert seen == []  # bringing the fork up asked the model nothing
        result = fork.run("three", timeout=10)
        assert (fork.agent_id, fork.session_id) == ("f1", "f1")
        assert result.output == "re: three"
        assert len(seen) == 1
        assert _texts(seen[0]) == [
            ("user", "one"),
            ("assistant", "re: one"),
            ("user", "three"),
        ]
        # The original is untouched, and still runs.
        assert store.read_events("s1", ref.agent_id) == before
        assert ref.run("four", timeout=10).output == "re: four"
    assert store.load("f1").data["forked_from"] == {"session": "s1", "at": at}


def _tree() -> Agent[Any]:
    leaf = Agent(
        "leaf",
        model=FunctionModel(
            lambda m, t: (
                [call("ask", question="color?")]
                if m[-1].role == "user"
                else f"leaf got {m[-1].content}"
            )
        ),
        tools=[ask],
    )
    mid = Agent(
        "mid",
        model=FunctionModel(lambda messages, tools: _leaf_or_echo(messages)),
        subagents=[leaf],
    )
    return Agent(
        "root",
        model=FunctionModel(lambda messages, tools: _mid_or_echo(messages)),
        subagents=[mid],
    )


def _leaf_or_echo(messages: list[Message]) -> Any:
    if messages[-1].role == "user":
        return [call("leaf", task="t")]
    return f"mid got {messages[-1].content}"


def _mid_or_echo(messages: list[Message]) -> Any:
    if messages[-1].role == "user":
        return [call("mid", task="t")]
    return f"root got {messages[-1].content}"


def test_a_suspended_tree_is_forked_and_each_branch_answered_its_way(
    store: SessionStore,
) -> None:
    """Both branches live in one runtime at once; each answer reaches only its own leaf."""
    with Runtime() as runtime:
        ref = runtime.spawn(_tree(), store=store, session_id="s1")
        result = ref.run("go", timeout=10)
        assert result.suspended
        (request,) = result.requests
        last = store.last_seq("s1", "root")
        fork = runtime.fork("s1", at=last, store=store, agents=[_tree()], new_id="f1")
        assert [n.agent_id for n in fork.tree().walk()] == ["f1", "f1-sub-1", "f1-sub-1-sub-1"]
        assert [n.status for n in fork.tree().walk()] == ["suspended"] * 3
        first = fork.resume_async({request.id: Answer(data="red")})
        second = ref.resume_async({request.id: Answer(data="blue")})
        forked, original = first.result(10), second.result(10)
    assert (forked.output, original.output) == (
        "root got mid got leaf got answer: red",
        "root got mid got leaf got answer: blue",
    )
    leaf = store.read_events("f1", "f1-sub-1-sub-1")
    results = [e["data"]["content"] for e in leaf if e["type"] == "tool_result"]
    assert results == ["answer: red"]


def test_a_fork_of_a_fork_outlives_both_originals(store: SessionStore) -> None:
    """Delete the original and the first fork: the second still restores and runs."""

    def agent() -> Agent[Any]:
        return Agent("chat", model=FunctionModel(lambda m, t: f"re: {m[-1].content}"))

    with Runtime() as runtime:
        ref = runtime.spawn(agent(), store=store, session_id="s1", agent_id="s1")
        for prompt in ("a", "b", "c"):
            ref.run(prompt, timeout=10)
        f1 = runtime.fork(
            "s1", at=_seq_of(store, "s1", "s1", "turn_end", 1), store=store, agents=[agent()]
        )
        f1.run("x", timeout=10)
        f1_id = f1.session_id
        assert str(f1_id).startswith("s1-fork-")
        assert f1_id is not None
        at = _seq_of(store, f1_id, f1_id, "turn_end", 2)  # after "x"
        f1.stop()
        ref.stop()
    store.delete("s1")
    with Runtime() as runtime:
        f2 = runtime.fork(f1_id, at=at, store=store, agents=[agent()], new_id="f2")
        f2.stop()
    store.delete(f1_id)
    with Runtime() as runtime:
        f2 = runtime.restore("f2", store=store, agents=[agent()])
        assert f2.run("y", timeout=10).output == "re: y"
        users = [m.content for m in f2.context().messages if m.role == "user"]
    assert users == ["a", "b", "x", "y"]


def test_a_fork_cut_while_a_child_ran_closes_the_call_and_runs_nothing(
    store: SessionStore,
) -> None:
    """Cut just before the root heard its child finish: the child is in the fork, its result
    is not, so the call is closed (outcome unknown), and nothing runs again."""
    child_model = FunctionModel(lambda m, t: "child done")
    child = Agent("child", model=child_model)
    lead_model = FunctionModel(
        lambda m, t: [call("child", task="t")] if m[-1].role == "user" else "lead done"
    )
    lead = Agent("lead", model=lead_model, subagents=[child])
    with Runtime() as runtime:
        ref = runtime.spawn(lead, store=store, session_id="s1")
        assert ref.run("go", timeout=10).output == "lead done"
        at = _seq_of(store, "s1", ref.agent_id, "subagent_finished") - 1
        asked = (len(lead_model.requests), len(child_model.requests))
        fork = runtime.fork("s1", at=at, store=store, agents=[lead], new_id="f1")
        assert (len(lead_model.requests), len(child_model.requests)) == asked
        assert [n.agent_id for n in fork.tree().walk()] == ["f1", "f1-sub-1"]
        tools = [m for m in fork.context().messages if m.role == "tool"]
    assert [m.content for m in tools] == [OUTCOME_UNKNOWN]  # in flight at the cut


def test_rewind_takes_the_same_id_and_keeps_the_abandoned_branch(store: SessionStore) -> None:
    def agent() -> Agent[Any]:
        return Agent("chat", model=FunctionModel(lambda m, t: f"re: {m[-1].content}"))

    with Runtime() as runtime:
        ref = runtime.spawn(agent(), store=store, session_id="s1", agent_id="s1")
        for prompt in ("a", "b"):
            ref.run(prompt, timeout=10)
        at = _seq_of(store, "s1", "s1", "turn_end", 0)
        with pytest.raises(UserError, match="live"):
            runtime.rewind("s1", at=at, store=store, agents=[agent()])
        ref.stop()
        whole = store.read_events("s1", "s1")
        back = runtime.rewind("s1", at=at, store=store, agents=[agent()])
        assert back.agent_id == "s1"
        back.run("c", timeout=10)
        users = [m.content for m in back.context().messages if m.role == "user"]
    assert users == ["a", "c"]
    assert store.read_events("s1-rewound-1", "s1") == whole  # the abandoned branch, readable


def test_fork_errors_are_typed_and_leave_nothing_behind(store: SessionStore) -> None:
    agent = Agent("chat", model=FunctionModel(lambda m, t: "ok"))
    with Runtime() as runtime:
        ref = runtime.spawn(agent, store=store, session_id="s1")
        ref.run("a", timeout=10)
        with pytest.raises(UserError, match="no event 999"):
            runtime.fork("s1", at=999, store=store, agents=[agent], new_id="f1")
        with pytest.raises(AgentDefinitionError):
            runtime.fork("s1", at=0, store=store, agents=[], new_id="f1")
        with pytest.raises(UserError, match="has the id"):
            runtime.fork("s1", at=0, store=store, agents=[agent], new_id=ref.agent_id)
    assert [s.session_id for s in store.list_sessions()] == ["s1"]


def test_kept_children_come_back_in_the_fork(store: SessionStore) -> None:
    def lead() -> Agent[Any]:
        helper = Agent("helper", model=FunctionModel(lambda m, t: f"h: {m[-1].content}"))
        script = [call("helper", task="one"), "ok", call("helper", task="two"), "ok"]
        return Agent(
            "lead",
            model=ScriptedModel(script, per_agent=True),
            subagents=[Subagent(helper, keep=True)],
        )

    with Runtime() as runtime:
        ref = runtime.spawn(lead(), store=store, session_id="s1", agent_id="s1")
        ref.run("go", timeout=10)
        fork = runtime.fork(
            "s1", at=store.last_seq("s1", "s1"), store=store, agents=[lead()], new_id="f1"
        )
        (child,) = fork.tree().children
        assert (child.agent_id, child.status) == ("f1-sub-1", "idle")
        fork.run("again", timeout=10)
    helper = [e for e in store.read_events("f1", "f1-sub-1") if e["type"] == "user_message"]
    assert [e["data"]["content"] for e in helper] == ["one", "two"]
