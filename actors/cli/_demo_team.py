"""The demo's agent tree: a lead, three researchers and a writer, with offline scripted models.

The same specs run on a real provider when a model is given: only the models change, the tools
(an offline knowledge base and a real micro-benchmark) stay as they are.

The scripted models are `FunctionModel`s that pick their reply from how far the current run has
got (the assistant messages since the last user message), not from a cursor kept in memory as
`ScriptedModel` does: so a demo session that was left suspended, stored and restored in another
process picks up its script exactly where the transcript stands.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from actors import (
    Agent,
    AssistantMessage,
    ContextUpdate,
    Message,
    Model,
    RunContext,
    Subagent,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
    tool,
)
from actors.testing import FunctionModel, Reply, call

__all__ = ["DEMO_QUESTION", "DemoContext", "build_team"]

DEMO_QUESTION = "How should we run a thousand LLM agents side by side without losing track?"

ScriptStep = Reply | Callable[[list[Message]], Reply]


@dataclass(frozen=True)
class DemoContext:
    """The demo's static channel (``tool_context``): how fast the simulated work goes.

    Attributes:
        pace: Seconds of simulated work per tool call and model reply, scaled: 1.0 is the
            default speed, 0 runs flat out.
    """

    pace: float = 1.0


# -- tools ---------------------------------------------------------------------------------------

_WEB = {
    "actor model": [
        (
            "https://example.org/actors-101",
            "An actor owns its state; others change it only by sending it messages.",
        ),
        (
            "https://example.org/supervision",
            "Supervisors restart failed actors, so one crash does not take down the system.",
        ),
        (
            "https://example.org/agent-context",
            "Agents that share one context window confuse each other's instructions.",
        ),
    ],
}

_PAPERS = {
    "P1": (
        "Hewitt et al., A Universal Modular Actor Formalism (1973)",
        "Computation as actors that send messages, create actors and pick their next behaviour.",
    ),
    "P2": (
        "Armstrong, Making reliable distributed systems (2003)",
        "Isolated processes with supervision trees keep telecom systems running for years.",
    ),
}


def _work(ctx: RunContext[DemoContext], seconds: float) -> None:
    """Simulated work that ends early when the run is cancelled (a tool never ignores Ctrl-C).

    A cancelled run discards what its tools return, so the tool just returns early.
    """
    pace = ctx.tool_context.pace if isinstance(ctx.tool_context, DemoContext) else 1.0
    if pace > 0:
        ctx.cancellation.wait(seconds * pace)


@tool
def web_search(ctx: RunContext[DemoContext], query: str) -> tuple[str, ContextUpdate]:
    """Search an offline snapshot of the web.

    Args:
        ctx: The run context; its tool context sets the pace of the simulated work.
        query: What to look for.
    """
    _work(ctx, 0.4)
    hits = _WEB.get(query.lower().strip(), _WEB["actor model"])
    update = ContextUpdate()
    for url, _ in hits:
        update = update.append("sources", url)
    return "\n".join(f"{url}: {text}" for url, text in hits), update


@tool
def find_papers(ctx: RunContext[DemoContext], topic: str) -> str:
    """Find papers on a topic in an offline catalogue.

    Args:
        ctx: The run context; its tool context sets the pace of the simulated work.
        topic: The topic.
    """
    _work(ctx, 0.3)
    return "\n".join(f"{pid}: {title}" for pid, (title, _) in _PAPERS.items())


@tool
def read_abstract(ctx: RunContext[DemoContext], paper_id: str) -> tuple[str, ContextUpdate]:
    """Read a paper's abstract and keep a note of it.

    Args:
        ctx: The run context; its tool context sets the pace of the simulated work.
        paper_id: The paper's id, as `find_papers` lists it.
    """
    _work(ctx, 0.3)
    if paper_id not in _PAPERS:
        return f"No paper {paper_id!r}; use an id from find_papers.", ContextUpdate()
    title, abstract = _PAPERS[paper_id]
    return f"{title}: {abstract}", ContextUpdate().merge("reading", {paper_id: abstract})


def _ping_pong(messages: int) -> float:
    """Microseconds per round trip between two threads through queues (a real measurement)."""
    ping: queue.Queue[int] = queue.Queue()
    pong: queue.Queue[int] = queue.Queue()

    def echo() -> None:
        for _ in range(messages):
            pong.put(ping.get())

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    start = time.perf_counter()
    for n in range(messages):
        ping.put(n)
        pong.get()
    elapsed = time.perf_counter() - start
    thread.join()
    return elapsed / messages * 1e6


@tool(requires_approval=True)
def run_benchmark(
    ctx: RunContext[DemoContext], workload: str, messages: int = 2000
) -> tuple[str, ContextUpdate]:
    """Run a micro-benchmark on this machine (needs approval: it runs code here).

    Args:
        ctx: The run context; its tool context sets the pace of the simulated work.
        workload: Which benchmark: only "ping-pong" (a message round trip between two threads).
        messages: How many round trips to time.
    """
    _work(ctx, 0.2)
    messages = max(100, min(messages, 20_000))
    micros = _ping_pong(messages)
    result = {"workload": workload, "messages": messages, "us_per_round_trip": round(micros, 1)}
    return (
        f"{workload}: {messages} round trips, {micros:.1f} µs each "
        f"(~{1e6 / micros:,.0f} messages/s per actor pair)",
        ContextUpdate().set("benchmark", result),
    )


@tool
def outline(ctx: RunContext[DemoContext], points: list[str]) -> tuple[str, ContextUpdate]:
    """Order the points of an answer into an outline.

    Args:
        ctx: The run context; its tool context sets the pace of the simulated work.
        points: The points to make, one sentence each.
    """
    _work(ctx, 0.2)
    return "\n".join(f"{n}. {p}" for n, p in enumerate(points, 1)), ContextUpdate().set(
        "outline", points
    )


# -- scripted models -----------------------------------------------------------------------------


def _since_prompt(messages: Sequence[Message]) -> list[Message]:
    """The messages after the last user message: what this run has done so far."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return list(messages[index + 1 :])
    return list(messages)


def _results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    return [m for m in _since_prompt(messages) if isinstance(m, ToolResultMessage)]


def _task(messages: Sequence[Message]) -> str:
    prompts = [m for m in messages if isinstance(m, UserMessage)]
    return str(prompts[-1].content) if prompts else ""


def scripted(steps: Sequence[ScriptStep], *, name: str, latency: float) -> Model:
    """A model that gives ``steps[n]`` as the ``n``-th reply of each run.

    A step is a reply, or a function of the messages that returns one.
    """

    def reply(messages: list[Message], _tools: list[ToolDefinition]) -> Reply:
        taken = sum(isinstance(m, AssistantMessage) for m in _since_prompt(messages))
        step = steps[min(taken, len(steps) - 1)]
        return step(messages) if callable(step) else step

    return FunctionModel(reply, latency=latency, name=name)


def _lead_plan(_messages: list[Message]) -> Reply:
    return AssistantMessage(
        content=(
            "Plan: three researchers in parallel (the web, the literature, a measurement), "
            "then a writer to turn their findings into one answer."
        ),
        tool_calls=(
            call("web_researcher", task="What do practitioners say about actors for agents?"),
            call("paper_researcher", task="What does the literature say about actor systems?"),
            call("benchmark_researcher", task="How cheap is one message between two actors?"),
        ),
    )


def _lead_delegate(messages: list[Message]) -> Reply:
    findings = "\n".join(f"- {r.tool_name}: {r.content}" for r in _results(messages))
    return call("writer", task=f"Question: {DEMO_QUESTION}\nFindings:\n{findings}")


def _lead_answer(messages: list[Message]) -> Reply:
    written = [r for r in _results(messages) if r.tool_name == "writer"]
    return str(written[-1].content) if written else "The writer gave no answer."


def _web_summary(messages: list[Message]) -> Reply:
    n = sum(str(r.content).count("https://") for r in _results(messages))
    return (
        f"{n} sources agree: give every agent its own state and let others reach it only by "
        "message; supervise failures; never share one context window between agents."
    )


def _paper_summary(_messages: list[Message]) -> Reply:
    return (
        "Hewitt (1973) defines actors that only send messages and create actors; Armstrong "
        "(2003) shows isolated processes under supervision trees stay up for years."
    )


def _benchmark_summary(messages: list[Message]) -> Reply:
    done = [r for r in _results(messages) if r.tool_name == "run_benchmark"]
    if not done or done[-1].is_error:
        return "The benchmark was not approved, so there is no measurement."
    return f"Measured on this machine: {done[-1].content}."


def _writer_outline(messages: list[Message]) -> Reply:
    lines = [ln[2:] for ln in _task(messages).splitlines() if ln.startswith("- ")]
    points = [ln.split(": ", 1)[-1] for ln in lines] or ["(no findings were given)"]
    return call("outline", points=points)


def _writer_answer(messages: list[Message]) -> Reply:
    outlined = [r for r in _results(messages) if r.tool_name == "outline"]
    body = str(outlined[-1].content) if outlined else ""
    return (
        "Run each agent as an actor that owns its own context.\n"
        f"{body}\n"
        "So: one actor per agent, messages instead of shared state, a supervisor per subtree, "
        "and a stored event log per actor to restore the tree after a crash."
    )


# -- the team ------------------------------------------------------------------------------------


def build_team(model: Model | str | None = None, *, pace: float = 1.0) -> Agent[str]:
    """The demo's root spec: a lead with three researchers and a writer as subagents.

    Args:
        model: A model (or ``"provider:model"`` string) for every agent of the tree; None uses
            the offline scripted models.
        pace: Scales the scripted models' latency (0: no latency).
    """
    latency = 0.25 * max(pace, 0.0)

    def pick(steps: Sequence[ScriptStep], name: str) -> Model | str:
        return model if model is not None else scripted(steps, name=name, latency=latency)

    # The roles are logged (system_prompt): a stored demo session shows what each agent was told.
    web = Agent(
        "web_researcher",
        model=pick(
            [call("web_search", query="actor model"), _web_summary], "scripted-web-researcher"
        ),
        system_prompt="You research the web. Search once, then answer in two sentences.",
        tools=[web_search],
        description="Researches what practitioners write on the web.",
    )
    papers = Agent(
        "paper_researcher",
        model=pick(
            [
                call("find_papers", topic="actor model"),
                [call("read_abstract", paper_id="P1"), call("read_abstract", paper_id="P2")],
                _paper_summary,
            ],
            "scripted-paper-researcher",
        ),
        system_prompt=(
            "You research the literature: find papers, read the relevant abstracts, then "
            "answer in two sentences citing them."
        ),
        tools=[find_papers, read_abstract],
        description="Researches the academic literature.",
    )
    bench = Agent(
        "benchmark_researcher",
        model=pick(
            [call("run_benchmark", workload="ping-pong", messages=2000), _benchmark_summary],
            "scripted-benchmark-researcher",
        ),
        system_prompt=(
            "You measure. Run the ping-pong benchmark once, then report the number in one sentence."
        ),
        tools=[run_benchmark],
        description="Measures things on this machine.",
    )
    writer = Agent(
        "writer",
        model=pick([_writer_outline, _writer_answer], "scripted-writer"),
        system_prompt=(
            "You write the final answer from the findings in your task: outline the points "
            "with the outline tool, then write a short answer."
        ),
        tools=[outline],
        description="Writes the final answer from research findings.",
    )
    return Agent(
        "lead",
        model=pick([_lead_plan, _lead_delegate, _lead_answer], "scripted-lead"),
        system_prompt=(
            "You lead a research team. Hand the three researchers one task each in a single "
            "reply, then give the writer the question and all their findings, then answer "
            "with the writer's text."
        ),
        subagents=[
            Subagent(web, timeout=120),
            Subagent(papers, timeout=120),
            Subagent(bench, timeout=300),
            Subagent(writer, timeout=120),
        ],
        description="Leads the research team.",
    )
