"""Models that talk to one server share its connections; a burst queues; shutdown closes them.

Issue 31: 1,000 agents sharing one `OpenAIChatModel` on `Runtime` ended in connect timeouts,
and one model per agent cost a client (and an SSL context) each. These tests run against
loopback servers: the scripted one of conftest (which records headers and client ports) and
bench/wire_server (concurrent, with latency, counting TCP connections).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from actors import Agent, Runtime, TreeLimits
from actors.context._messages import UserMessage
from actors.exceptions import ModelTimeoutError, UserError
from actors.models import AnthropicModel, HTTPPool, OpenAIChatModel, RetryPolicy
from actors.models._model import ModelRequest
from actors.models._pool import Stripes, shared_clients
from bench.wire_server import serve, stats

ONCE = RetryPolicy(max_attempts=1)


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content=text)])


def openai_text(text: str) -> dict[str, Any]:
    return {
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def anthropic_text(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


@pytest.fixture(scope="module")
def wire_url() -> Iterator[str]:
    with serve(latency=0.05, jitter=0.01) as url:
        yield url


def _runs_in_turn(runtime: Runtime, refs: list[Any], turns: int) -> list[BaseException]:
    """Each agent runs ``turns`` prompts one after another, all agents at once."""
    finished = threading.Event()
    lock = threading.Lock()
    left = [len(refs)]
    errors: list[BaseException] = []

    def start(ref: Any, turn: int) -> None:
        def ended(future: Any) -> None:
            try:
                future.result()
            except Exception as exc:
                with lock:
                    errors.append(exc)
            if turn + 1 < turns:
                start(ref, turn + 1)
                return
            with lock:
                left[0] -= 1
                if left[0] == 0:
                    finished.set()

        ref.run_async(f"question {turn}").add_done_callback(ended)

    for ref in refs:
        start(ref, 0)
    assert finished.wait(50), "the runs did not end"
    return errors


# -- at scale, on Runtime ---------------------------------------------------------------------


def test_200_agents_sharing_one_model_finish_on_reused_connections(wire_url: str) -> None:
    before = stats(wire_url)
    model = OpenAIChatModel("fake", base_url=wire_url)
    with Runtime(limits=TreeLimits(max_agents=400)) as runtime:
        refs = [runtime.spawn(Agent("client", model=model)) for _ in range(200)]
        errors = _runs_in_turn(runtime, refs, turns=2)
    after = stats(wire_url)
    assert errors == []
    assert after["requests"] - before["requests"] == 400
    # Every second request went out on a connection kept from the first (no churn); the
    # extra one is `stats` asking.
    assert after["connections"] - before["connections"] - 1 <= 200


def test_one_model_per_agent_share_one_set_of_connections(wire_url: str) -> None:
    models = [OpenAIChatModel("fake", base_url=wire_url, api_key=f"sk-{n}") for n in range(100)]
    with Runtime(limits=TreeLimits(max_agents=200)) as runtime:
        refs = [runtime.spawn(Agent("client", model=model)) for model in models]
        assert _runs_in_turn(runtime, refs, turns=2) == []
        (stripes,) = {held for model in models for held in model._lease.held}
        assert stripes.holders == 100, "every model holds a share of the same clients"
        clients = [client for client in stripes._clients if client is not None]
        assert clients
    assert stripes.closed, "the runtime's shutdown closed the shared clients"
    assert all(client.is_closed for client in clients)
    assert stripes not in shared_clients().live()


def test_a_burst_larger_than_the_pool_queues_instead_of_failing(wire_url: str) -> None:
    before = stats(wire_url)
    pool = HTTPPool(max_connections=4)
    model = OpenAIChatModel("fake", base_url=wire_url, pool=pool, retry=ONCE, timeout=5.0)

    async def main() -> list[str]:
        async with model:
            replies = await asyncio.gather(*(model.request(ask(f"q{n}")) for n in range(40)))
        return [reply.message.content for reply in replies]

    contents = asyncio.run(main())
    after = stats(wire_url)
    assert len(contents) == 40
    assert all(contents)
    assert after["requests"] - before["requests"] == 40
    assert after["connections"] - before["connections"] - 1 <= 4


def test_a_request_that_waits_past_the_pool_timeout_fails_with_a_timeout() -> None:
    with serve(latency=0.5) as url:
        timeout = httpx.Timeout(10.0, pool=0.05)
        model = OpenAIChatModel(
            "fake", base_url=url, pool=HTTPPool(max_connections=1), retry=ONCE, timeout=timeout
        )

        async def main() -> list[Any]:
            async with model:
                requests = (model.request(ask(text)) for text in ("first", "second"))
                return await asyncio.gather(*requests, return_exceptions=True)

        outcomes = asyncio.run(main())
    errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    assert len(errors) == 1, outcomes
    assert isinstance(errors[0], ModelTimeoutError)
    assert "HTTPPool" in str(errors[0])


# -- sharing without leaking --------------------------------------------------------------------


def test_models_of_one_server_share_a_connection_and_each_sends_its_own_key(
    server: Any, wire: Any
) -> None:
    server.script(
        wire.json(200, openai_text("a")),
        wire.json(200, anthropic_text("b")),
        wire.json(200, openai_text("c")),
    )
    first = OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-first", retry=ONCE)
    second = AnthropicModel("m", base_url=server.url, api_key="sk-second", retry=ONCE)
    third = OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-third", retry=ONCE)

    async def main() -> None:
        for model in (first, second, third):
            await model.request(ask())
        for model in (first, second, third):
            await model.aclose()

    asyncio.run(main())
    one, two, three = server.received
    assert one.client_port == two.client_port == three.client_port, "one connection for all"
    assert one.headers["authorization"] == "Bearer sk-first"
    assert "x-api-key" not in one.headers
    assert "anthropic-version" not in one.headers
    assert two.headers["x-api-key"] == "sk-second"
    assert "authorization" not in two.headers
    assert three.headers["authorization"] == "Bearer sk-third"
    assert "anthropic-version" not in three.headers


def test_a_cookie_one_model_was_given_never_reaches_another(server: Any, wire: Any) -> None:
    server.script(
        wire.json(200, openai_text("a"), headers={"set-cookie": "session=first; Path=/"}),
        wire.json(200, openai_text("b")),
    )
    first = OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-first", retry=ONCE)
    second = OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-second", retry=ONCE)

    async def main() -> None:
        async with first, second:
            await first.request(ask())
            await second.request(ask())

    asyncio.run(main())
    assert "cookie" not in server.received[1].headers


def test_the_last_model_to_close_closes_the_shared_clients(server: Any, wire: Any) -> None:
    server.script(wire.json(200, openai_text("a")), wire.json(200, openai_text("b")))
    first = OpenAIChatModel("m", base_url=server.url + "/v1", retry=ONCE)
    second = OpenAIChatModel("m", base_url=server.url + "/v1", retry=ONCE)

    async def main() -> tuple[bool, bool]:
        await first.request(ask())
        await second.request(ask())
        (stripes,) = first._lease.held
        assert second._lease.held == [stripes]
        await first.aclose()
        open_after_one = not stripes.closed
        await second.aclose()
        return open_after_one, stripes.closed

    assert asyncio.run(main()) == (True, True)


def test_models_with_different_pools_do_not_share(server: Any, wire: Any) -> None:
    server.script(wire.json(200, openai_text("a")), wire.json(200, openai_text("b")))
    small = OpenAIChatModel("m", base_url=server.url + "/v1", pool=HTTPPool(max_connections=2))
    default = OpenAIChatModel("m", base_url=server.url + "/v1")

    async def main() -> bool:
        async with small, default:
            await small.request(ask())
            await default.request(ask())
            return small._lease.held != default._lease.held

    assert asyncio.run(main())


def test_a_model_used_from_two_loops_keeps_each_loops_clients_open(wire_url: str) -> None:
    # The runtime's loop and the application's own: a request (or a close) on one must not
    # close the clients the other is using.
    model = OpenAIChatModel("fake", base_url=wire_url, retry=ONCE)
    with Runtime() as runtime:
        runtime.spawn(Agent("client", model=model)).run("hi", timeout=30)
        (on_runtime,) = model._lease.held

        async def elsewhere() -> None:
            async with model:  # a request, then `aclose`, on this loop
                await model.request(ask())

        asyncio.run(elsewhere())
        assert model._lease.held == [on_runtime]
        assert not on_runtime.closed
        assert runtime.spawn(Agent("client", model=model)).run("again", timeout=30).output
    assert on_runtime.closed


# -- the queue ----------------------------------------------------------------------------------


def _stripes(pool: HTTPPool) -> Stripes:
    return Stripes(pool, asyncio.get_running_loop(), "key", httpx.create_ssl_context())


def test_free_connections_are_reused_warmest_first() -> None:
    async def main() -> list[int]:
        stripes = _stripes(HTTPPool(max_connections=6, connections_per_client=2))
        slots = [await stripes.acquire(None) for _ in range(3)]
        for slot in reversed(slots):
            stripes.release(slot)
        return [*slots, await stripes.acquire(None)]

    # Client 0's two connections, then client 1; a light load goes back to client 0.
    assert asyncio.run(main()) == [0, 0, 1, 0]


def test_a_waiter_cancelled_as_its_slot_arrives_passes_the_slot_on() -> None:
    async def main() -> tuple[int, int]:
        stripes = _stripes(HTTPPool(max_connections=1))
        held = await stripes.acquire(None)
        first = asyncio.ensure_future(stripes.acquire(None))
        second = asyncio.ensure_future(stripes.acquire(None))
        await asyncio.sleep(0)  # one turn of the loop: both tasks start and wait
        assert stripes.waiting == 2
        stripes.release(held)  # handed to `first`...
        first.cancel()  # ...which is cancelled before it runs again
        await asyncio.gather(first, return_exceptions=True)
        slot = await asyncio.wait_for(second, 5)
        return slot, stripes.in_flight

    assert asyncio.run(main()) == (0, 1)


@pytest.mark.parametrize(
    "options",
    [
        {"max_connections": 0},
        {"connections_per_client": -1},
        {"max_connections": 2.5},
        {"keepalive_expiry": -1},
        {"keepalive_expiry": float("inf")},
    ],
)
def test_a_pool_with_nonsense_sizes_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(UserError, match="HTTPPool"):
        HTTPPool(**options)


def test_a_model_refuses_a_pool_that_is_not_an_http_pool() -> None:
    with pytest.raises(UserError, match="HTTPPool"):
        OpenAIChatModel("m", base_url="http://localhost/v1", pool=10)  # type: ignore[arg-type]


def test_shared_clients_use_the_proxies_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Made once per server, not per client: a proxy set in the environment still applies.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)

    async def proxied() -> bool:
        client = _stripes(HTTPPool(max_connections=1)).client(0)
        url = httpx.URL("http://models.example/v1")
        try:
            return client._transport_for_url(url) is not client._transport
        finally:
            await client.aclose()

    assert not asyncio.run(proxied())
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert asyncio.run(proxied())
