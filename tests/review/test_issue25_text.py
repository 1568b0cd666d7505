"""Issue 25, item 1: text that cannot be encoded never poisons a session.

The rule (docs/events.md, "Text"): a lone surrogate entering through any door becomes U+FFFD;
every other string (NUL, unnormalized forms, long texts) is kept exactly; ids that a store
keeps are refused with a typed error instead. Before it, a ``"\\ud800"`` in a prompt was logged
and every later request of the session failed in the request encoder, for ever.

The fuzz tests feed surrogates, NUL, over-long and mixed-normalization strings through every
door (metadata, prompt, steering, a provider's reply and tool-call arguments, a tool's result,
``ContextUpdate`` keys and values, logged events, peer messages) and every reader (the store,
``ref.context()``, the trace page, ``actors trace``/``sessions show``/``sessions export``,
``Simulation.export_jsonl``, ``CachedModel`` keys), and check that no untyped error comes out
and that each session takes another run.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import unicodedata
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actors import (
    Agent,
    ContextUpdate,
    Event,
    ModelRequest,
    Runtime,
    UserMessage,
    tool,
)
from actors._text import clean_json, clean_text
from actors.cli import main
from actors.exceptions import AgentDefinitionError, UserError
from actors.models import CachedModel, OpenAIChatModel, RetryPolicy
from actors.models._cached import request_key
from actors.sim import Simulation
from actors.store import AgentRecord, MemoryStore, PostgresStore, SessionStore, SQLiteStore
from actors.testing import FunctionModel, ScriptedModel, allow_model_requests, call
from actors.trace import render_trace, write_trace

SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
# Any code point, with surrogates and NUL far more often than chance would bring them.
NASTY = st.lists(
    st.one_of(st.characters(), SURROGATES, st.just("\x00"), st.just("e\u0301")), max_size=12
).map("".join)
OVER_LONG = "\ud800é\x00" * 200_000 + "\U0001f600"  # 600k code points, every kind inside
NAMED = [
    "\ud800",  # a lone high surrogate
    "\udfff tail",  # a lone low one
    "\ud83d\ude00",  # a pair split into two code points (as a UTF-16 reader would join it)
    "\ude00\ud83d",  # the same two, in the wrong order: two lone surrogates
    "\x00",
    "nul\x00inside",
    "\u00e9 and e\u0301",  # NFC and NFD side by side: kept as they are
    "\u212b\ufeff\u2028",  # a compatibility form, a BOM, a line separator
]


def strict(value: Any) -> bytes:
    """``value`` as UTF-8 JSON, failing as a provider's request encoder or a file would."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def assert_clean(value: Any) -> None:
    strict(value)  # raises UnicodeEncodeError on a surrogate anywhere inside
    assert clean_json(value) is value


def key_of(text: str) -> str:
    return "k" + text  # never empty


# -- a provider over httpx's mock transport: the real request encoder and reply parser ---------


class Provider:
    """An OpenAI-compatible endpoint in process; it answers a first request with tool calls
    whose JSON arguments carry ``bad``, a tool result with a reply whose content is ``bad``
    (both escaped as a provider escapes them), and anything else with "ok"."""

    def __init__(self) -> None:
        self.bad = ""
        self.bodies: list[Any] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content.decode("utf-8"))  # strict: a request is valid UTF-8
        assert_clean(body)
        self.bodies.append(body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            message: dict[str, Any] = {"role": "assistant", "content": self.bad}
        elif body.get("tools") and last["content"] != "again":
            calls = [
                ("echo", {"text": self.bad}),
                ("remember", {"key": key_of(self.bad), "notes": {self.bad: self.bad}}),
            ]
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call-{n}",
                        "type": "function",
                        # ensure_ascii: surrogates and NUL arrive as \\ud800 and \\u0000 escapes
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                    for n, (name, arguments) in enumerate(calls)
                ],
            }
        else:
            message = {"role": "assistant", "content": "ok"}
        reply = {
            "id": "r",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
        return httpx.Response(200, content=json.dumps(reply).encode("ascii"))


@pytest.fixture
def provider() -> Iterator[Provider]:
    with allow_model_requests(True):
        yield Provider()


def fuzz_agent(provider: Provider) -> Agent[Any]:
    @tool
    def echo(text: str) -> str:
        """Say it back.

        Args:
            text: What to say.
        """
        return text + provider.bad

    @tool
    def remember(key: str, notes: dict[str, str]) -> ContextUpdate:
        """Remember something.

        Args:
            key: Where.
            notes: What.
        """
        bad = provider.bad
        return (
            ContextUpdate()
            .set(key, {bad: [bad, {"nested": bad}]})
            .set("notes", notes)
            .merge("merged", {bad: {bad: bad}})
            .append("list", bad)
            .log_event("app.note", {bad: bad, "text": bad})
        )

    model = OpenAIChatModel(
        "m",
        base_url="http://provider.test/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(provider)),
        retry=RetryPolicy(max_attempts=1),
    )
    return Agent("fuzz", model=model, tools=[echo, remember])


def check_session(ctx: Any, bad: str) -> None:
    """What the doors made of ``bad``: the text rule, and valid text kept exactly."""
    assert_clean(ctx.serialize())
    kept = clean_text(bad)
    assert ctx.metadata["given" + kept] == {kept: [kept]}
    assert ctx.metadata[key_of(kept)] == {kept: [kept, {"nested": kept}]}, ctx.messages
    assert ctx.metadata["notes"] == {kept: kept}  # tool-call arguments, keys included
    contents = [m.content for m in ctx.messages]
    assert kept in contents  # the prompt
    assert kept + kept in contents  # the tool's result
    if bad == kept:  # valid text round-trips unchanged: NUL, NFD, BOM, long
        assert ctx.metadata["list"][-1] == bad


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(bad=NASTY)
@example(bad=OVER_LONG)
@example(bad=NAMED[0])
@example(bad=NAMED[2])
@example(bad=NAMED[4])
@example(bad=NAMED[6])
def test_every_door_keeps_the_session_usable(
    bad: str, provider: Provider, tmp_path_factory: pytest.TempPathFactory
) -> None:
    provider.bad = bad
    folder = tmp_path_factory.mktemp("doors")
    agent = fuzz_agent(provider)
    with SQLiteStore(folder / "s.db") as store:
        with Runtime() as rt:
            ref = rt.open_session(
                agent, session_id="s", store=store, metadata={"given" + bad: {bad: [bad]}}
            )
            first = ref.run(bad, timeout=30)
            assert first.status == "completed"
            assert first.output == clean_text(bad)
            ref.send(bad)  # steering, to an idle agent: joins the transcript
            again = ref.run("again", timeout=30)
            assert again.status == "completed"
            check_session(ref.context(), bad)
        # Readers of what was stored, and the session restored in another runtime.
        stored = store.load("s")
        assert_clean([a.context for a in stored.agents])
        render_trace(stored).encode("utf-8")
        write_trace(store, "s", folder / "trace.html")
        with Runtime() as rt:
            ref = rt.open_session(agent, session_id="s", store=store)
            assert ref.run("again", timeout=30).status == "completed"
            check_session(ref.context(), bad)


# -- peers, steering and the event log of a simulation --------------------------------------


def strict_model(reply: Callable[[list[Any]], Any]) -> FunctionModel:
    """A model that encodes each request as a provider's encoder does, then replies."""

    def answer(messages: list[Any], tools: Any) -> Any:
        strict([m.model_dump(mode="json") for m in messages])
        return reply(messages)

    return FunctionModel(answer)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad=NASTY)
@example(bad=NAMED[1])
@example(bad=NAMED[3])
@example(bad=NAMED[5])
@example(bad=NAMED[7])
def test_peer_messages_and_the_simulation_log(bad: str) -> None:
    def send(to: str) -> ContextUpdate:
        """Tell a peer.

        Args:
            to: The peer.
        """
        return ContextUpdate().send(to, bad)

    def sender_reply(messages: list[Any]) -> Any:
        return call("send", to="peer") if messages[-1].role == "user" else bad

    sim = Simulation(seed=1)
    peer = sim.spawn(Agent("peer", model=strict_model(lambda messages: bad)), agent_id="peer")
    sender = sim.spawn(Agent("sender", model=strict_model(sender_reply), tools=[send]))
    assert sender.run(bad).status == "completed"
    sim.run()  # the peer's turn, started by the message
    sender.send(bad)
    assert sender.run("again").status == "completed"
    assert peer.run("again").status == "completed"
    heard = peer.context()
    assert_clean(heard.serialize())
    assert any(clean_text(bad) in m.content for m in heard.messages if m.role == "user")
    out = io.StringIO()
    sim.export_jsonl(out)
    for line in out.getvalue().split("\n")[:-1]:  # lines end at \n alone (U+2028 is text)
        assert_clean(json.loads(line))


# -- logs that an older version wrote ---------------------------------------------------------


def old_events(bad: str) -> list[Event]:
    """A finished turn as a version before the text rule logged it, ``bad`` unrepaired."""
    at = datetime(2025, 1, 1, tzinfo=UTC)
    data: list[tuple[str, dict[str, Any]]] = [
        ("turn_start", {"run_id": "r1"}),
        ("user_message", {"role": "user", "content": bad}),
        ("step_start", {"iteration": 1, "step": 1}),
        (
            "assistant_message",
            {
                "role": "assistant",
                "content": bad,
                "tool_calls": [{"id": "c" + bad, "name": "echo", "arguments": {bad: bad}}],
            },
        ),
        (
            "tool_result",
            {
                "role": "tool",
                "tool_call_id": "c" + bad,
                "tool_name": "echo",
                "content": bad,
                "is_error": False,
            },
        ),
        (
            "context_update",
            {"ops": [{"op": "set", "key": "k" + bad, "value": {bad: [bad]}}]},
        ),
        ("app.note", {bad: bad}),
        ("error", {"type": "X", "message": bad}),
        ("assistant_message", {"role": "assistant", "content": bad, "tool_calls": []}),
        ("turn_end", {"run_id": "r1", "reason": "completed"}),
    ]
    return [Event(seq=n, type=t, data=d, created_at=at) for n, (t, d) in enumerate(data)]


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], SessionStore]:
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "old.db")
    if request.param == "memory":
        return MemoryStore
    dsn = request.getfixturevalue("postgres_dsn")
    node = request.node.nodeid.encode("utf-8", "surrogatepass")
    schema = f"t_{hashlib.sha256(node).hexdigest()[:16]}"  # one schema per test
    return lambda: PostgresStore(dsn, schema=schema)


def write_old_session(store: SessionStore, bad: str) -> None:
    store.create_session("old", root_agent_id="old", data={"spec": "fuzz", "note": bad})
    record = AgentRecord("old", None, "fuzz", "idle")
    store.put_agent("old", record)
    store.append_events("old", "old", old_events(bad))


@pytest.mark.parametrize("bad", NAMED[:4])
def test_a_log_written_before_the_rule_is_read_and_runs_again(
    bad: str,
    store_factory: Callable[[], SessionStore],
    provider: Provider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = store_factory()
    write_old_session(store, bad)
    kept = clean_text(bad)
    stored = store.load("old")
    assert_clean(stored.data)
    assert_clean(stored.agents[0].context)
    assert stored.agents[0].context["events"][1]["data"]["content"] == kept
    render_trace(stored).encode("utf-8")
    write_trace(store, "old", tmp_path / "old.html")
    with Runtime() as rt:
        ref = rt.open_session(fuzz_agent(provider), session_id="old", store=store)
        ctx = ref.context()
        assert_clean(ctx.serialize())
        assert ctx.metadata == {"k" + kept: {kept: [kept]}}
        assert ref.run("again", timeout=30).status == "completed"  # the request encodes
    assert provider.bodies, "the restored session asked the model"
    if isinstance(store, SQLiteStore):
        # The command's readers, as a user runs them (stdout must take the text as UTF-8).
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        monkeypatch.chdir(tmp_path)
        db = str(tmp_path / "old.db")
        for argv in (
            ["sessions", "show", "old", "--full", "--db", db],
            ["sessions", "export", "old", "--db", db],
            ["sessions", "list", "--db", db],
            ["trace", "old", "--db", db, "-o", str(tmp_path / "cli.html")],
            ["trace", "old", "--db", db, "-o", "-"],
        ):
            capsys.readouterr()
            assert main(argv) == 0, argv
            captured = capsys.readouterr()
            captured.out.encode("utf-8")
            captured.err.encode("utf-8")
        exported = [json.loads(line) for line in main_output(["sessions", "export", "old"], db)]
        assert_clean(exported)
    store.close()


def main_output(argv: list[str], db: str) -> list[str]:
    out = io.StringIO()
    real = sys.stdout
    sys.stdout = out
    try:
        assert main([*argv, "--db", db]) == 0
    finally:
        sys.stdout = real
    return out.getvalue().splitlines()


@pytest.mark.parametrize("value", [NAMED[4], NAMED[5], NAMED[6], NAMED[7], OVER_LONG[1:3] * 9])
def test_valid_text_round_trips_unchanged_through_every_store(
    value: str, store_factory: Callable[[], SessionStore]
) -> None:
    store = store_factory()
    write_old_session(store, value)
    events = store.load("old").agents[0].context["events"]
    assert events[1]["data"]["content"] == value
    assert events[6]["data"] == {value: value}
    store.close()


# -- the rest: ids, the cache key, files written whole --------------------------------------


@pytest.mark.parametrize("bad_id", ["s\ud800", "s\x00"])
def test_an_id_that_cannot_be_stored_is_refused_with_a_typed_error(
    bad_id: str, store_factory: Callable[[], SessionStore]
) -> None:
    store = store_factory()
    agent = Agent("a", model=ScriptedModel(["ok"]))
    with Runtime() as rt, pytest.raises(UserError, match="cannot be stored"):
        rt.open_session(agent, session_id=bad_id, store=store)
    with pytest.raises(UserError, match="cannot be stored"):
        AgentRecord("a", None, bad_id, "idle")
    with pytest.raises(AgentDefinitionError, match="cannot be used"):
        Agent(bad_id, model=ScriptedModel(["ok"]))
    store.close()


def test_the_cache_key_of_a_request_holding_a_surrogate() -> None:
    # A message built around validation is the only way left to hold one; it still has a key.
    odd = UserMessage.model_construct(role="user", content="a\ud800")
    assert len(request_key(ModelRequest(messages=[odd]), "m")) == 64
    model = CachedModel(ScriptedModel(["hi"]), ":memory:")
    sim = Simulation(seed=1)
    assert sim.spawn(Agent("a", model=model)).run("a\ud800").output == "hi"
    model.close()


def test_export_jsonl_never_leaves_a_partial_file(tmp_path: Path) -> None:
    sim = Simulation(seed=1)
    sim.spawn(Agent("a", model=ScriptedModel(["hi"]))).run("go")
    target = tmp_path / "log.jsonl"
    target.write_text("the old export\n")
    # An event that cannot be written, after some that can: the write fails midway.
    at = datetime(2025, 1, 1, tzinfo=UTC)
    sim._host.log.append(("a", Event(seq=99, type="app.x", data={"x": object()}, created_at=at)))
    with pytest.raises(TypeError):
        sim.export_jsonl(target)
    assert target.read_text() == "the old export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl"]
    sim._host.log.pop()
    assert sim.export_jsonl(target) == len(target.read_text().splitlines())


def test_normalization_is_never_applied() -> None:
    nfd = unicodedata.normalize("NFD", "é")
    assert clean_text(nfd) is nfd
    assert UserMessage(content=nfd).content == nfd


def test_the_trace_page_of_a_session_built_by_hand_stays_valid_utf8() -> None:
    # A store that does not repair old logs (or a session edited by hand) reaches the page
    # with its lone surrogate: escaped in the embedded JSON, the page is still UTF-8.
    with MemoryStore() as store:
        write_old_session(store, "ok")
        stored = store.load("old")
    stored.agents[0].context["events"][1]["data"]["content"] = "\ud800"
    page = render_trace(stored)
    page.encode("utf-8")
    assert "\\ud800" in page
