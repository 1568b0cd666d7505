"""Two sessions in one store: alice's tool sends bob a message. Driven by test_peers.py.

python crash_peers.py DB crash     # dies right after alice's step (with the send) is written
python crash_peers.py DB restore   # restores bob, then alice; prints bob's received messages
python crash_peers.py DB crash-busy   # bob is mid-run; dies as soon as bob logged the message
python crash_peers.py DB restore-busy # restores both; prints bob's transcript
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from actors import Agent, ContextUpdate, Event, RunContext, Runtime, ToolCall
from actors.store import SQLiteStore
from actors.testing import ScriptedModel


def tell(ctx: RunContext[Any], to: str, text: str) -> tuple[str, ContextUpdate]:
    """Tell another agent.

    Args:
        to: Its id.
        text: The message.
    """
    return "sent", ContextUpdate().send(to, text)


class CrashAfterSend(SQLiteStore):
    """Dies as soon as a `message_sent` event is durable, before anyone can deliver it."""

    def append_events(
        self, session_id: str, agent_id: str, events: Sequence[Event], **kw: Any
    ) -> None:
        super().append_events(session_id, agent_id, events, **kw)
        if any(e.type == "message_sent" for e in events):
            os._exit(17)


class CrashAfterReceipt(SQLiteStore):
    """Dies as soon as bob's `message_received` is durable: before his next step boundary."""

    def append_events(
        self, session_id: str, agent_id: str, events: Sequence[Event], **kw: Any
    ) -> None:
        super().append_events(session_id, agent_id, events, **kw)
        if any(e.type == "message_received" for e in events):
            os._exit(17)


ALICE = Agent(
    "alice",
    model=ScriptedModel(
        [ToolCall(id="t1", name="tell", arguments={"to": "bob", "text": "hello"}), "done"],
        per_agent=True,
    ),
    tools=[tell],
)
BOB = Agent("bob", model=ScriptedModel(["thanks"] * 5, per_agent=True))
BUSY_BOB = Agent("bob", model=ScriptedModel(["thanks"] * 5, per_agent=True, latency=60))


def busy(db: str, mode: str) -> None:
    if mode == "crash-busy":
        store = CrashAfterReceipt(db)
        with Runtime() as runtime:
            bob = runtime.spawn(BUSY_BOB, store=store, session_id="b", agent_id="bob")
            bob.run_async("think for a minute")
            runtime.spawn(ALICE, store=store, session_id="a", agent_id="alice").run("go")
            bob.context()  # ordered after alice's message: bob has handled it
        raise SystemExit("bob's receipt was never written")
    store = SQLiteStore(db)
    with Runtime() as runtime:
        bob = runtime.restore("b", store=store, agents=[BOB])
        runtime.restore("a", store=store, agents=[ALICE])  # sends again: bob has it already
        print(json.dumps([m.content for m in bob.context().messages]))


def main(db: str, mode: str) -> None:
    if mode.endswith("-busy"):
        busy(db, mode)
        return
    if mode == "crash":
        store = CrashAfterSend(db)
        with Runtime() as runtime:
            runtime.spawn(BOB, store=store, session_id="b", agent_id="bob")
            runtime.spawn(ALICE, store=store, session_id="a", agent_id="alice").run("go")
        raise SystemExit("alice's send was never written")
    store = SQLiteStore(db)
    with Runtime() as runtime:
        bob = runtime.restore("b", store=store, agents=[BOB])
        ended = threading.Event()
        bob.subscribe(lambda e: ended.set() if e.type == "turn_end" else None)
        runtime.restore("a", store=store, agents=[ALICE])
        if mode == "restore":
            assert ended.wait(10), "bob never heard alice's message"
        else:  # "again": nothing new may reach bob; a context query is ordered after it
            pass
        events = bob.context().events
    print(json.dumps([e.data["content"] for e in events if e.type == "message_received"]))
    print(json.dumps([e.type for e in events]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
