"""CachedModel: record a model's replies in SQLite, replay them offline, typed misses."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from actors import (
    Agent,
    AssistantMessage,
    CancellationToken,
    Message,
    ModelFallback,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Runtime,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from actors.context._message_view import MessageView
from actors.exceptions import CacheMissError, UserError
from actors.models import CachedModel, request_key
from actors.models._cached import CacheMode
from actors.sim import Simulation
from actors.testing import FunctionModel, ScriptedModel, call


def counting_model() -> tuple[FunctionModel, list[int]]:
    asked: list[int] = []

    def reply(messages: list[object], tools: list[object]) -> str:
        asked.append(1)
        return f"answer {len(asked)}"

    return FunctionModel(reply), asked


def test_a_recorded_run_replays_identically_without_the_model(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    inner, asked = counting_model()
    agent = Agent("a", model=CachedModel(inner, path))
    with Runtime() as runtime:
        first = runtime.spawn(agent).run("hello")
    assert asked == [1]
    replay = CachedModel(None, path, mode="replay", name="function")
    with Runtime() as runtime:
        again = runtime.spawn(Agent("a", model=replay)).run("hello")
    assert again.output == first.output == "answer 1"
    assert asked == [1]  # the inner model was not asked again
    assert (replay.hits, replay.misses, len(replay)) == (1, 0, 1)


def test_a_miss_in_replay_mode_is_a_typed_error(tmp_path: Path) -> None:
    replay = CachedModel(None, tmp_path / "empty.db", mode="replay")
    with Runtime() as runtime, pytest.raises(Exception, match="has no reply") as info:
        runtime.spawn(Agent("a", model=replay)).run("never recorded")
    assert isinstance(info.value.__cause__, CacheMissError)
    request = ModelRequest(messages=(UserMessage(content="x"),))
    with pytest.raises(CacheMissError, match="record it first"):
        asyncio.run(replay.request(request))


def test_record_mode_asks_again_what_the_file_holds_and_auto_reuses(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    inner, asked = counting_model()
    request = ModelRequest(messages=(UserMessage(content="x"),))
    asyncio.run(CachedModel(inner, path, mode="record").request(request))
    recorder = CachedModel(inner, path, mode="record")
    first = asyncio.run(recorder.request(request))
    # Asked again (the file's reply is replaced), but once: an identical request of the same
    # recording gets the same reply, or its replay could not give what the run saw.
    again = asyncio.run(recorder.request(request))
    assert len(asked) == 2
    assert first.message.content == again.message.content == "answer 2"
    assert len(recorder) == 1
    auto = CachedModel(inner, path)
    assert asyncio.run(auto.request(request)).message.content == "answer 2"
    assert len(asked) == 2


def test_a_simulation_replays_on_virtual_time(tmp_path: Path) -> None:
    path = tmp_path / "sim.db"
    script = ScriptedModel([call("noop"), "done"])

    def noop() -> str:
        """Nothing."""
        return "ok"

    def run(model: CachedModel) -> list[str]:
        sim = Simulation(seed=2)
        ref = sim.spawn(Agent("a", model=model, tools=[noop]))
        ref.run("go")
        assert sim.now == 2 * 1.5
        return [e.type for _, e in sim.events]

    recorded = run(CachedModel(script, path, latency=1.5))
    replayed = run(CachedModel(None, path, mode="replay", latency=1.5, name="scripted"))
    assert recorded == replayed


@pytest.mark.parametrize(
    ("inner", "mode"), [(None, "auto"), (None, "record"), (ScriptedModel([]), "sometimes")]
)
def test_bad_arguments_are_user_errors(tmp_path: Path, inner: object, mode: str) -> None:
    with pytest.raises(UserError):
        CachedModel(inner, tmp_path / "x.db", mode=mode)  # type: ignore[arg-type]


# -- concurrent recording ------------------------------------------------------------------------


class SlowCounting:
    """A model that yields to the loop before answering, so identical requests overlap."""

    name = "slow"

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._lock = threading.Lock()

    async def request(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            self.asked.append(str(request.messages[-1].content))
            n = len(self.asked)
        for _ in range(3):
            await asyncio.sleep(0)  # yield: every other coroutine of the gather runs meanwhile
        return ModelResponse(AssistantMessage(content=f"reply {n}"))


def requests(distinct: int, copies: int) -> list[ModelRequest]:
    return [
        ModelRequest(messages=(UserMessage(content=f"q{i}"),), agent_id=f"agent-{i}-{copy}")
        for copy in range(copies)
        for i in range(distinct)
    ]


@pytest.mark.parametrize("mode", ["auto", "record"])
def test_identical_requests_in_flight_together_ask_once_and_share_the_reply(
    tmp_path: Path, mode: CacheMode
) -> None:
    inner = SlowCounting()
    model = CachedModel(inner, tmp_path / "c.db", mode=mode)
    asked = requests(20, 3)

    async def all_at_once() -> list[ModelResponse]:
        return await asyncio.gather(*(model.request(r) for r in asked))

    replies = asyncio.run(all_at_once())
    assert sorted(inner.asked) == sorted(f"q{i}" for i in range(20))
    assert len(model) == 20
    by_question: dict[str, set[str]] = {}
    for request, reply in zip(asked, replies, strict=True):
        by_question.setdefault(str(request.messages[-1].content), set()).add(reply.message.content)
    assert all(len(answers) == 1 for answers in by_question.values())
    # What the run saw is what a replay gives.
    replay = CachedModel(None, tmp_path / "c.db", mode="replay", name="slow")
    for request, reply in zip(asked, replies, strict=True):
        assert asyncio.run(replay.request(request)).message == reply.message


def test_when_the_first_asker_is_cancelled_the_one_waiting_asks_itself(tmp_path: Path) -> None:
    calls: list[int] = []

    class FirstHangs:
        name = "hangs"

        async def request(self, request: ModelRequest) -> ModelResponse:
            calls.append(1)
            if len(calls) == 1:
                await asyncio.Event().wait()  # until cancelled
            return ModelResponse(AssistantMessage(content="answered"))

    model = CachedModel(FirstHangs(), tmp_path / "c.db")
    request = ModelRequest(messages=(UserMessage(content="q"),))

    async def scene() -> str:
        first = asyncio.ensure_future(model.request(request))
        await asyncio.sleep(0)  # the first asks the model, and hangs there
        second = asyncio.ensure_future(model.request(request))
        await asyncio.sleep(0)  # the second waits for the first's reply
        assert calls == [1]
        first.cancel()
        reply = await second
        with pytest.raises(asyncio.CancelledError):
            await first
        return reply.message.content

    assert asyncio.run(scene()) == "answered"
    assert len(calls) == 2
    assert len(model) == 1


def test_threads_recording_at_once_lose_and_duplicate_no_row(tmp_path: Path) -> None:
    inner = SlowCounting()
    model = CachedModel(inner, tmp_path / "c.db")
    asked = requests(50, 1)
    results: list[dict[str, str]] = [{} for _ in range(6)]
    start = threading.Barrier(6)

    def worker(index: int) -> None:
        mine = list(asked)
        random.Random(index).shuffle(mine)

        async def all_at_once() -> list[ModelResponse]:
            return await asyncio.gather(*(model.request(r) for r in mine))

        start.wait(timeout=10)
        for request, reply in zip(mine, asyncio.run(all_at_once()), strict=True):
            results[index][str(request.messages[-1].content)] = reply.message.content

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(model) == 50
    assert sorted(inner.asked) == sorted(f"q{i}" for i in range(50))  # each asked once
    assert all(result == results[0] for result in results)  # every thread saw the same replies
    assert model.misses == 50
    assert model.hits == 5 * 50


def test_a_second_writer_of_the_same_file_uses_the_reply_that_won(tmp_path: Path) -> None:
    # Two CachedModels on one file have a connection each, as two processes would.
    path = tmp_path / "shared.db"
    request = ModelRequest(messages=(UserMessage(content="same"),))
    first = CachedModel(FunctionModel(lambda m, t: "first"), path)

    class Slower:
        name = "function"

        async def request(self, request: ModelRequest) -> ModelResponse:
            await first.request(request)  # the other writer records this key meanwhile
            return ModelResponse(AssistantMessage(content="second"))

    second = CachedModel(Slower(), path)
    assert asyncio.run(second.request(request)).message.content == "first"
    assert len(second) == 1


# -- keys --------------------------------------------------------------------------------------


def exchange(call_id: str, *, answer_to: str | None = None) -> tuple[Message, ...]:
    return (
        UserMessage(content="look it up"),
        AssistantMessage(tool_calls=(ToolCall(id=call_id, name="find", arguments={"q": "x"}),)),
        ToolResultMessage(tool_call_id=answer_to or call_id, tool_name="find", content="found"),
    )


def test_keys_leave_out_what_the_model_never_sees() -> None:
    base = ModelRequest(messages=exchange("call_1"), agent_id="a-1")
    same = [
        replace(base, agent_id="b-2", cancellation=CancellationToken()),
        replace(base, messages=exchange("call_zz9")),  # the provider's ids differ
        replace(base, settings=ModelSettings(timeout=5.0, stream=True)),
        replace(base, on_delta=lambda delta: None),
    ]
    different = [
        replace(base, messages=(*exchange("call_1")[:2], exchange("call_1", answer_to="x")[2])),
        replace(base, messages=(UserMessage(content="look it up!"), *exchange("call_1")[1:])),
        replace(base, settings=ModelSettings(temperature=0.5)),
        replace(base, tools=(ToolDefinition("find", "Find.", {"type": "object"}),)),
        replace(base, output_schema={"type": "object"}),
    ]
    key = request_key(base, "gpt")
    assert all(request_key(r, "gpt") == key for r in same)
    assert len({key, *(request_key(r, "gpt") for r in different)}) == 1 + len(different)
    assert request_key(base, "claude") != key


def test_an_agents_transcript_keys_as_the_same_messages_in_a_tuple() -> None:
    # The simulator hands the model a view of the agent's transcript, and the key is hashed
    # from where the agent's previous request stopped; a plain tuple is hashed whole.
    seen: list[ModelRequest] = []

    class Spy:
        name = "spy"

        def __init__(self) -> None:
            self.inner = ScriptedModel([call("noop"), "one", call("noop"), "two"] * 2)

        async def request(self, request: ModelRequest) -> ModelResponse:
            seen.append(request)
            return await self.inner.request(request)

    def noop() -> str:
        """Nothing."""
        return "ok"

    sim = Simulation(seed=3)
    ref = sim.spawn(
        Agent("a", model=Spy(), tools=[noop], instructions=lambda ctx: f"t={sim.now:g}")
    )
    for prompt in ("first", "second", "third"):
        ref.run(prompt)
    assert len(seen) == 6
    assert any(isinstance(r.messages, MessageView) for r in seen)
    for request in seen:
        assert request_key(request, "m") == request_key(
            replace(request, messages=tuple(request.messages)), "m"
        )


# -- the file ------------------------------------------------------------------------------------


def test_a_file_of_the_earlier_key_format_is_refused_with_a_way_out(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT, response TEXT)")
        db.execute("INSERT INTO replies VALUES ('k', 'm', '{}')")
    with pytest.raises(UserError, match=r"earlier key format.*record it again"):
        CachedModel(None, path, mode="replay")


def test_an_unreadable_reply_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    request = ModelRequest(messages=(UserMessage(content="x"),))
    asyncio.run(CachedModel(FunctionModel(lambda m, t: "ok"), path).request(request))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE replies SET response = '{\"message\": 3}'")
    with pytest.raises(CacheMissError, match="cannot be read"):
        asyncio.run(CachedModel(None, path, mode="replay", name="function").request(request))


def test_a_replay_gives_the_fallbacks_the_recorded_reply_had(tmp_path: Path) -> None:
    fallback = ModelFallback(model="main", error="ModelHTTPError", message="503", next_model="b")

    class Fell:
        name = "fell"

        async def request(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(AssistantMessage(content="hi"), fallbacks=(fallback,))

    request = ModelRequest(messages=(UserMessage(content="x"),))
    asyncio.run(CachedModel(Fell(), tmp_path / "c.db").request(request))
    replay = CachedModel(None, tmp_path / "c.db", mode="replay", name="fell")
    assert asyncio.run(replay.request(request)).fallbacks == (fallback,)


def test_keys_of_format_2_stay_the_same() -> None:
    # Files recorded by earlier versions are looked up by these keys: a faster key must
    # hash the same bytes (tools, settings, a transcript view with a head, tool-call ids).
    tools = (ToolDefinition("tell", "Tell", {"type": "object"}), ToolDefinition("b", "ü", {}))
    calls = (ToolCall(id="c1", name="tell", arguments={"x": 1}), ToolCall(id="c2", name="b"))
    items: list[Message] = [
        UserMessage(content="hi é"),
        AssistantMessage(content="", tool_calls=calls),
        ToolResultMessage(tool_call_id="c2", tool_name="b", content="r2"),
    ]
    plain = ModelRequest(messages=tuple(items), tools=tools)
    tuned = ModelRequest(messages=tuple(items[:1]), settings={"temperature": 0.5, "timeout": 3})
    view = ModelRequest(messages=MessageView(items, 3, origin=(10**9, 0)), tools=tools[:1])
    assert [request_key(r, "m") for r in (plain, tuned, view)] == [
        "df0752e5b296ce160e881dc9660611efa93a45806529d96c8a8de39155769e42",
        "5cba49ff3291a1adbc48478a191f72edbabebe932e50247f0bf73b47f9e5b2c1",
        "ad6767654a5e717626a840c059aa20f4cac7e654b91c1514fe16e04dcdca9db9",
    ]


def test_a_list_of_tools_changed_between_requests_changes_the_key() -> None:
    tools = [ToolDefinition("a", "A", {})]
    request = ModelRequest(messages=(UserMessage(content="hi"),), tools=tools)
    before = request_key(request, "m")
    tools.append(ToolDefinition("b", "B", {}))
    assert request_key(request, "m") != before


def test_a_reply_text_is_read_once_and_shared(tmp_path: Path) -> None:
    # Replies are immutable: requests that get the same recorded text share one reply.
    path = tmp_path / "cache.db"
    recorder = CachedModel(ScriptedModel(["ok"], per_agent=True), path, mode="record")
    asks = [ModelRequest(messages=(UserMessage(content=f"go {n}"),)) for n in range(2)]
    for ask in asks:
        asyncio.run(recorder.request(ask))
    recorder.close()
    player = CachedModel(None, path, mode="replay", name="scripted")
    one, two = (asyncio.run(player.request(ask)) for ask in asks)
    assert one is two
    assert player.hits == 2
    player.close()


def test_a_part_is_keyed_by_its_hash_not_its_bytes() -> None:
    from actors import DocumentPart
    from actors.models import _cache_key

    pdf = b"%PDF-1.4\n" + b"x" * 2_000_000

    def request(data: bytes) -> ModelRequest:
        part = DocumentPart(data=data, media_type="application/pdf", name="a.pdf")
        return ModelRequest(messages=(UserMessage(content=("Read it.", part)),))

    first = request(pdf)
    key = request_key(first, "m")
    assert request_key(request(pdf), "m") == key  # equal content, other objects
    assert request_key(request(pdf + b"y"), "m") != key
    text = _cache_key._messages[id(first.messages[0])][1]
    assert len(text) < 1000  # the memo holds the digest, not 2.7 MB of base64
    assert first.messages[0].content[1].sha256.encode() in text  # type: ignore[union-attr]
