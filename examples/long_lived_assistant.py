"""A long-lived assistant that persists to SQLite, is killed mid-run, restores and continues.

The story, all offline:

1. A worker process spawns the assistant with a `SQLiteStore` and has two turns with it: the
   user says their name (a tool stores it in the agent's metadata), then asks for a booking,
   whose tool is still working when...
2. ... the worker is killed (SIGKILL: no clean-up, no goodbye).
3. This process restores the session from the file: the context is rebuilt from the event log,
   the interrupted tool call gets a result saying what happened, and the conversation goes on:
   the assistant still knows the user's name.

Run it: ``python examples/long_lived_assistant.py``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from actors import (
    Agent,
    ContextUpdate,
    Message,
    RunContext,
    Runtime,
    ToolResultMessage,
    UserMessage,
    tool,
)
from actors.store import SQLiteStore
from actors.testing import FunctionModel, call

SESSION = "assistant-1"


@tool
def remember(key: str, value: str) -> tuple[str, ContextUpdate]:
    """Remember a fact about the user.

    Args:
        key: What the fact is about.
        value: The fact.
    """
    return f"remembered {key}", ContextUpdate().set(key, value)


@tool
def recall(ctx: RunContext, key: str) -> str:
    """Recall a fact about the user.

    Args:
        ctx: The run context (its metadata holds what was remembered).
        key: What the fact is about.
    """
    return str(ctx.metadata.get(key, "unknown"))


@tool
def book_table(ctx: RunContext, people: int) -> str:
    """Book a table at the restaurant.

    Args:
        ctx: The run context.
        people: How many people.
    """
    print("worker: booking in progress ...", flush=True)
    ctx.cancellation.wait(60)  # a slow partner system: the worker is killed before it answers
    return f"booked a table for {people}"


def assistant_model(messages: list[Message], _tools: object) -> object:
    """A scripted assistant that reads the transcript, so it is correct after a restore too."""
    start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    prompt = str(messages[start].content)
    results = [m for m in messages[start:] if isinstance(m, ToolResultMessage)]
    if prompt.startswith("My name is"):
        name = prompt.removeprefix("My name is").strip(" .")
        return f"Nice to meet you, {name}." if results else call("remember", key="name", value=name)
    if prompt.startswith("Book"):
        return f"Booking: {results[-1].content}" if results else call("book_table", people=2)
    if results:
        return f"Your name is {results[-1].content}."
    return call("recall", key="name")


assistant = Agent(
    "assistant",
    model=FunctionModel(assistant_model),
    tools=[remember, recall, book_table],
    tool_timeout=120,
)


def worker(db: Path) -> None:
    """The process that gets killed."""
    with SQLiteStore(db) as store, Runtime() as runtime:
        ref = runtime.spawn(assistant, store=store, session_id=SESSION)
        print("worker:", ref.run("My name is Ada.").output, flush=True)
        ref.run("Book a table for two tonight.")  # never returns: killed during the tool


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "sessions.sqlite"
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(db)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="")
            if "booking in progress" in line:
                proc.kill()  # SIGKILL, mid-run
                break
        proc.wait(timeout=30)
        print(f"worker killed (exit code {proc.returncode})")

        with SQLiteStore(db) as store, Runtime() as runtime:
            ref = runtime.restore(SESSION, store=store, agents=[assistant])
            context = ref.context()
            print(
                f"restored {SESSION!r}: {len(context.messages)} messages, "
                f"metadata {context.metadata}"
            )
            interrupted = context.messages[-1]
            print(f"the interrupted call: {interrupted.content}")
            print("assistant:", ref.run("What is my name?").output)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(Path(sys.argv[2]))
    else:
        main()
