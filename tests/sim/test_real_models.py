"""Real models in a simulation: requests in flight together, the same bytes whatever HTTP does.

The models here answer over HTTP from `bench.wire_server` (a loopback OpenAI/Anthropic wire
server in its own process, with latency, jitter and 429s), or are user `Model` classes whose
replies come back after a random wall-time delay.
"""

from __future__ import annotations

import asyncio
import io
import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from actors import (
    Agent,
    AssistantMessage,
    ContextUpdate,
    ModelRequest,
    ModelResponse,
    RunContext,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from actors.exceptions import ModelHTTPError, RunFailedError, UserError
from actors.models import (
    AnthropicModel,
    CachedModel,
    FallbackModel,
    OpenAIChatModel,
    RetryPolicy,
)
from actors.sim import RateLimit, Simulation
from actors.testing import ScriptedModel, allow_model_requests, call
from bench.wire_server import serve, stats

Peer = Literal["ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal"]
PEERS: tuple[str, ...] = Peer.__args__  # type: ignore[attr-defined]


def send(ctx: RunContext[None], to: Peer) -> tuple[str, ContextUpdate]:
    """Send a note to another agent."""
    return f"sent to {to}", ContextUpdate().send(to, f"a note from {ctx.agent_id}")


SEND = Tool.from_function(send)


class TimedOpenAI(OpenAIChatModel):
    """A real model with a virtual latency drawn from the simulation's seeded random source."""

    def latency_for(self, request: ModelRequest, rng: random.Random) -> float:
        return rng.uniform(0.1, 0.6)


def chat(model: Any, **settings: Any) -> Simulation:
    """Eight agents messaging each other: every note starts a turn of two requests."""
    sim = Simulation(seed=7, message_delay=1.0, **settings)
    spec = Agent("peer", model=model, tools=[SEND])
    refs = [sim.spawn(spec, agent_id=name) for name in PEERS]
    for ref in refs:
        ref.run_async(f"hello, {ref.agent_id}")
    sim.run(until=3.5)
    return sim


def export(sim: Simulation) -> str:
    out = io.StringIO()
    sim.export_jsonl(out)
    return out.getvalue()


@pytest.fixture(autouse=True)
def _real_requests() -> Iterator[None]:
    with allow_model_requests(True):
        yield


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve(latency=0.05, jitter=0.04) as url:
        yield url


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_chatty_world_over_http_gives_the_same_bytes_in_any_reply_order(server: str) -> None:
    first = chat(TimedOpenAI("fake", base_url=server), max_in_flight=4)
    second = chat(TimedOpenAI("fake", base_url=server), max_in_flight=4)
    with serve(latency=0.05, jitter=0.04, fail_rate=0.05, seed=3) as flaky:
        retried = chat(TimedOpenAI("fake", base_url=flaky), max_in_flight=4)
        refused = stats(flaky)["failures"]

    log = export(first)
    assert export(second) == log
    assert export(retried) == log  # 429s retried with the server's backoff change nothing
    assert refused > 0
    assert '"type":"message_received"' in log
    assert first.requests.done == first.steps > 8 * 2
    assert first.requests.failed == 0
    assert first.requests.in_flight == 0
    assert first.requests.tokens > 0
    # Requests really overlapped, and never more than max_in_flight of them.
    assert 1 < stats(server)["max_in_flight"] <= 4


def test_a_provider_error_fails_that_agent_only(server: str) -> None:
    sim = Simulation(seed=1)
    no_retry = RetryPolicy(max_attempts=1)
    models = {
        "good": OpenAIChatModel("fake", base_url=server),
        "refused": Refusing(0),
        "closed": OpenAIChatModel(
            "fake", base_url=f"http://127.0.0.1:{closed_port()}/v1", retry=no_retry
        ),
    }
    runs = {
        name: sim.spawn(Agent(name, model=model)).run_async("hi") for name, model in models.items()
    }
    sim.run()

    assert runs["good"].result().output.startswith("reply ")
    for name in ("refused", "closed"):
        with pytest.raises(RunFailedError, match="the model failed"):
            runs[name].result()
    assert sim.requests.done == 1
    assert sim.requests.failed == 2


class Shuffled:
    """A user model: replies depend on the request only, and come back after a random wait."""

    name = "shuffled"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    async def request(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.rng.uniform(0.0, 0.03))
        last = request.messages[-1]
        n = len(request.messages)
        if request.tools and not isinstance(last, ToolResultMessage):
            to = PEERS[(n + len(request.agent_id)) % len(PEERS)]
            call = ToolCall(id=f"c{n}", name="send", arguments={"to": to})
            reply = AssistantMessage(tool_calls=(call,))
        else:
            reply = AssistantMessage(content=f"done after {n} messages")
        return ModelResponse(reply, Usage(requests=1, input_tokens=n, output_tokens=1))


class Refusing(Shuffled):
    """A user model whose provider refuses the request (a 400)."""

    async def request(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0)
        raise ModelHTTPError("openai:fake answered 400: bad request", status_code=400)


def test_a_user_async_model_gives_the_same_bytes_whatever_order_it_answers_in() -> None:
    first = chat(Shuffled(seed=1))
    second = chat(Shuffled(seed=2))  # other waits: replies come back in another order

    assert export(first) == export(second)
    assert first.requests.done == first.steps > 8 * 2
    assert first.requests.tokens > 0


@pytest.mark.parametrize("provider", ["anthropic", "fallback", "openai-stream"])
def test_providers_work_in_a_simulation(server: str, provider: str) -> None:
    port = closed_port()

    def model() -> Any:
        if provider == "anthropic":
            return AnthropicModel("fake", base_url=server[:-3], api_key="k")
        if provider == "openai-stream":
            return OpenAIChatModel("fake", base_url=server, settings={"stream": True})
        down = OpenAIChatModel(
            "down", base_url=f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(max_attempts=1)
        )
        return FallbackModel(down, OpenAIChatModel("fake", base_url=server))

    first, second = chat(model()), chat(model())

    assert export(first) == export(second)
    assert first.requests.failed == 0
    assert first.requests.done == first.steps > 8 * 2
    if provider == "fallback":
        assert '"type":"model_fallback"' in export(first)


def test_a_cached_model_records_over_http_and_replays_the_same_bytes(
    server: str, tmp_path: Path
) -> None:
    path = tmp_path / "replies.sqlite"
    recorded = chat(CachedModel(OpenAIChatModel("fake", base_url=server), path))
    replayed = chat(CachedModel(None, path, mode="replay", name="openai:fake"))

    assert export(replayed) == export(recorded)
    assert recorded.requests.done > 0
    assert replayed.requests.done == 0  # every reply came from the file, at once


class Clocked(Shuffled):
    """Notes when each request starts, on wall time."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.starts: list[float] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.starts.append(time.monotonic())
        return await super().request(request)


def test_rate_limits_hold_back_requests_without_changing_the_log() -> None:
    free = chat(Clocked())
    model = Clocked()
    limited = chat(model, rate_limits={"shuffled": RateLimit(requests_per_minute=600)})

    # 10 a second, at most a second's worth at once: the nth request starts (n - 10) / 10 s
    # after the first.
    starts = sorted(model.starts)
    assert len(starts) > 20
    assert starts[-1] - starts[0] >= (len(starts) - 10) / 10 - 0.05
    assert export(limited) == export(free)


def test_rate_limits_and_max_in_flight_are_checked() -> None:
    with pytest.raises(UserError, match="max_in_flight"):
        Simulation(max_in_flight=0)
    with pytest.raises(UserError, match="rate_limits"):
        Simulation(rate_limits={"m": 5})  # type: ignore[dict-item]
    with pytest.raises(UserError, match="requests_per_minute"):
        RateLimit(requests_per_minute=0)
    with pytest.raises(UserError, match="concurrent_tools"):
        Simulation(concurrent_tools="lookup")


def gather_world(tool: Tool, agents: int, **settings: Any) -> tuple[Simulation, list[Any]]:
    sim = Simulation(seed=2, tool_duration=1.5, **settings)
    model = ScriptedModel([call(tool.name), "done"], per_agent=True)
    spec = Agent("gatherer", model=model, tools=[tool])
    runs = [sim.spawn(spec).run_async("go") for _ in range(agents)]
    sim.run()
    return sim, runs


def test_concurrent_tools_run_together_and_keep_their_virtual_duration() -> None:
    agents = 5
    arrived: list[str] = []
    everyone: list[asyncio.Event] = []

    async def meet(ctx: RunContext[None]) -> str:
        """Wait until every agent's call has started (only possible if they run together)."""
        if not everyone:
            everyone.append(asyncio.Event())
        arrived.append(ctx.agent_id)
        if len(arrived) % agents == 0:
            everyone[0].set()
        await asyncio.wait_for(everyone[0].wait(), 10)
        return "all here"

    barrier = threading.Barrier(agents, timeout=10)

    def meet_blocking(ctx: RunContext[None]) -> str:
        """The same, for a blocking tool (on a pool of threads)."""
        barrier.wait()
        return "all here"

    for tool in (Tool.from_function(meet), Tool.from_function(meet_blocking)):
        everyone.clear()
        sim, runs = gather_world(tool, agents, concurrent_tools={tool.name})
        assert [run.result().output for run in runs] == ["done"] * agents
        assert '"content":"all here"' in export(sim)
        assert sim.now == 1.5  # the tool's virtual duration, whatever its wall time


def test_a_concurrent_tool_cannot_delegate_and_says_why() -> None:
    def delegating(ctx: RunContext[None]) -> str:
        """Delegate to a child."""
        return str(ctx.delegate(Agent("child", model=ScriptedModel(["x"])), "go"))

    sim, runs = gather_world(Tool.from_function(delegating), 1, concurrent_tools=True)
    assert runs[0].result().output == "done"
    assert "cannot delegate" in export(sim)


def test_a_slow_real_model_times_out_as_that_agents_failure() -> None:
    class Stuck(Shuffled):
        async def request(self, request: ModelRequest) -> ModelResponse:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    sim = Simulation()
    run = sim.spawn(Agent("slow", model=Stuck(0), model_timeout=0.2)).run_async("hi")
    sim.run()
    with pytest.raises(RunFailedError, match=r"timed out after 0\.2 s"):
        run.result()
    assert sim.requests.failed == 1
