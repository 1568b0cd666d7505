"""Per-run overhead of actors' peers: one tool call then an answer, with a scripted model.

Runs in the peers' own venv (bench/.peers-venv, from bench/requirements-peers.txt), never in
the project's; `bench.run` creates that venv and calls this once per framework:

    bench/.peers-venv/bin/python bench/peers.py --framework pydantic-ai [--quick] [--json PATH]

Frameworks: ``pydantic-ai`` (its `FunctionModel`), ``openai-agents`` (a scripted `Model`
subclass, tracing off), ``langgraph`` (a scripted model node, its `ToolNode` and
`tools_condition`). Each is measured through its sync entry point and its async one, one run
after another on one event loop, and with 100 runs at once (``asyncio.gather``, wall / 100).
The headline sequential figure is the faster of sync and async, each framework at its best.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import finish, fmt_time, median, parser

FRAMEWORKS = ("pydantic-ai", "openai-agents", "langgraph")
DISTRIBUTIONS = {
    "pydantic-ai": "pydantic-ai-slim",
    "openai-agents": "openai-agents",
    "langgraph": "langgraph",
}


def echo(text: str) -> str:
    """Give the text back.

    Args:
        text: Anything.
    """
    return text


@dataclass
class Peer:
    """One framework's agent, ready to run: a blocking run and an awaitable one."""

    run_sync: Callable[[], Any]
    run_async: Callable[[], Awaitable[Any]]
    check: Callable[[Any], bool]


# -- the peers ------------------------------------------------------------------------------


def pydantic_ai() -> Peer:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("echo", {"text": "hi"})])

    agent = Agent(FunctionModel(model), tools=[echo])
    return Peer(
        lambda: agent.run_sync("go"),
        lambda: agent.run("go"),
        lambda result: result.output == "done",
    )


def openai_agents() -> Peer:
    from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class Scripted(Model):
        """Calls `echo` unless the last input item is its output; then answers "done"."""

        async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any):
            last = input[-1] if isinstance(input, list) else {}
            kind = last.get("type") if isinstance(last, dict) else getattr(last, "type", None)
            if kind == "function_call_output":
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                out: Any = ResponseOutputMessage(
                    id="m1", type="message", role="assistant", status="completed", content=[text]
                )
            else:
                out = ResponseFunctionToolCall(
                    id="f1",
                    call_id="c1",
                    type="function_call",
                    name="echo",
                    arguments='{"text": "hi"}',
                )
            return ModelResponse(output=[out], usage=Usage(), response_id=None)

        def stream_response(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError

    agent = Agent(name="bench", model=Scripted(), tools=[function_tool(echo)])
    config = RunConfig(tracing_disabled=True)
    return Peer(
        lambda: Runner.run_sync(agent, "go", run_config=config),
        lambda: Runner.run(agent, "go", run_config=config),
        lambda result: result.final_output == "done",
    )


def langgraph() -> Peer:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    def model(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="done")]}
        call = {"name": "echo", "args": {"text": "hi"}, "id": "c1", "type": "tool_call"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([tool(echo)]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    app = graph.compile()
    return Peer(
        lambda: app.invoke({"messages": [HumanMessage("go")]}),
        lambda: app.ainvoke({"messages": [HumanMessage("go")]}),
        lambda result: result["messages"][-1].content == "done",
    )


BUILDERS: dict[str, Callable[[], Peer]] = {
    "pydantic-ai": pydantic_ai,
    "openai-agents": openai_agents,
    "langgraph": langgraph,
}


# -- measuring ------------------------------------------------------------------------------


def sequential_sync(peer: Peer, n: int) -> float:
    clock = time.perf_counter
    samples = []
    for _ in range(n):
        began = clock()
        result = peer.run_sync()
        samples.append(clock() - began)
    assert peer.check(result), result
    return median(samples)


async def sequential_async(peer: Peer, n: int) -> float:
    clock = time.perf_counter
    samples = []
    for _ in range(n):
        began = clock()
        result = await peer.run_async()
        samples.append(clock() - began)
    assert peer.check(result), result
    return median(samples)


async def concurrent(peer: Peer, width: int, rounds: int) -> float:
    clock = time.perf_counter
    samples = []
    for r in range(rounds + 1):
        began = clock()
        results = await asyncio.gather(*(peer.run_async() for _ in range(width)))
        if r:  # the first round warms up
            samples.append((clock() - began) / width)
        assert all(peer.check(result) for result in results)
    return median(samples)


def measure(framework: str, quick: bool, fraction: float = 1.0) -> dict[str, Any]:
    runs = 30 if quick else max(100, int(1_000 * fraction))
    width, rounds = (20, 2) if quick else (100, max(2, round(10 * fraction)))
    began = time.perf_counter()
    peer = BUILDERS[framework]()
    setup = time.perf_counter() - began
    for _ in range(min(30, runs)):  # warm up
        peer.run_sync()
    gc.collect()
    sync = sequential_sync(peer, runs)

    async def rest() -> tuple[float, float]:
        for _ in range(min(30, runs)):
            await peer.run_async()
        return await sequential_async(peer, runs), await concurrent(peer, width, rounds)

    aseq, wide = asyncio.run(rest())
    return {
        "framework": framework,
        "version": metadata.version(DISTRIBUTIONS[framework]),
        "quick": quick,
        "fraction": fraction,
        "sizes": {"runs": runs, "width": width, "rounds": rounds},
        "setup_s": setup,
        "run_sync_s": sync,
        "run_async_s": aseq,
        "run_s": min(sync, aseq),
        "run_concurrent_s": wide,
        "concurrency": width,
    }


def report(r: dict[str, Any]) -> str:
    return (
        f"{r['framework']} {r['version']}: run {fmt_time(r['run_s'])} "
        f"(sync {fmt_time(r['run_sync_s'])}, async {fmt_time(r['run_async_s'])}), "
        f"{r['concurrency']} at once {fmt_time(r['run_concurrent_s'])} per run"
    )


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--framework", choices=FRAMEWORKS, required=True)
    p.add_argument("--fraction", type=float, default=1.0, help="scale the sizes")
    args = p.parse_args(argv)
    result = measure(args.framework, args.quick, args.fraction)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
