"""The conformance tests of binary parts: messages with images round-trip exactly, stored once.

Every store must give back what it was given. A store that keeps parts' content outside its
events (SQLite, Postgres) says so by answering `BlobConformance.stored_payloads` and
`BlobConformance.stored_blob_count`; the tests then also check that the content is stored
once and that the event rows hold references, not base64. A store that keeps parts inline
(the memory store) leaves both at None.
"""

from __future__ import annotations

import random

from actors.context._agent_context import AgentContext
from actors.context._messages import AssistantMessage, ToolResultMessage, UserMessage
from actors.context._parts import DocumentPart, ImagePart
from actors.store._conformance_base import ConformanceBase, counting_clock
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord

__all__ = ["BlobConformance", "screenshot", "screenshots_context"]

_PNG = b"\x89PNG\r\n\x1a\n"


def screenshot(n: int, size: int = 1500) -> ImagePart:
    """A distinct, reproducible PNG part (a PNG header and ``size`` random bytes) for ``n``."""
    return ImagePart(data=_PNG + random.Random(n).randbytes(size), media_type="image/png")


def screenshots_context(count: int = 100, distinct: int = 60) -> AgentContext:
    """A context of ``count`` user messages with a screenshot each (``distinct`` different).

    Screenshot ``i`` is distinct for ``i < distinct``; the others repeat screenshot 0. A tool
    result with two parts and a replaced message with a part are in it too.
    """
    ctx = AgentContext("root", name="root-spec", clock=counting_clock())
    for i in range(count):
        shot = screenshot(i if i < distinct else 0)
        ctx.add_message(UserMessage(content=[f"screen {i}", shot]))
        ctx.add_message(AssistantMessage(content=f"seen {i}"))
    report = DocumentPart(data=b"%PDF-1.4 report", media_type="application/pdf", name="r.pdf")
    ctx.add_message(
        ToolResultMessage(tool_call_id="call-1", tool_name="shoot", content=[screenshot(1), report])
    )
    ctx.replace_message(0, UserMessage(content=["screen 0 again", screenshot(0)]))
    return ctx


class BlobConformance(ConformanceBase):
    """Tests of messages with binary parts; part of `StoreConformance`."""

    def stored_payloads(self, store: SessionStore) -> list[str] | None:
        """The stored text of every event payload and snapshot, or None (parts kept inline)."""
        return None

    def stored_blob_count(self, store: SessionStore) -> int | None:
        """How many blobs the store holds, or None when it keeps parts inline."""
        return None

    @staticmethod
    def _with_parts(store: SessionStore, session_id: str = "s1") -> AgentContext:
        ctx = screenshots_context()
        store.create_session(session_id, root_agent_id="root")
        store.put_agent(session_id, AgentRecord("root", None, "root-spec", "idle"))
        store.append_events(session_id, "root", ctx.events[:50])
        store.append_events(session_id, "root", ctx.events[50:])
        return ctx

    def test_parts_round_trip_exactly(self, store: SessionStore) -> None:
        """100 screenshots (repeated and distinct) load and read back as written."""
        ctx = self._with_parts(store)
        written = [event.model_dump(mode="json") for event in ctx.events]
        assert store.load("s1").agent("root").context["events"] == written
        assert store.read_events("s1", "root") == written
        assert store.read_events("s1", "root", start=7, stop=9) == written[7:9]
        restored = AgentContext.deserialize(store.load("s1").agent("root").context)
        assert restored.messages == ctx.messages

    def test_reappending_events_with_parts_is_idempotent(self, store: SessionStore) -> None:
        """The same batch again (a retry after a crash) is accepted and changes nothing."""
        ctx = self._with_parts(store)
        store.append_events("s1", "root", ctx.events[40:60])
        assert store.last_seq("s1", "root") == len(ctx.events) - 1
        assert store.read_events("s1", "root") == [e.model_dump(mode="json") for e in ctx.events]

    def test_content_is_stored_once_outside_the_events(self, store: SessionStore) -> None:
        """The same image twice is one blob; no event row holds a part's base64."""
        ctx = self._with_parts(store)
        count = self.stored_blob_count(store)
        payloads = self.stored_payloads(store)
        if count is None or payloads is None:
            return  # the store keeps parts inline
        assert count == 61  # 60 screenshots and the report
        joined = "".join(payloads)
        for part in (screenshot(0), screenshot(59)):
            assert part.data is not None
            assert part.data[:100] not in joined
            assert part.sha256 in joined
        # 201 events with 100 screenshots of 1.5 kB: the log keeps a reference per part.
        assert len(joined) < 60_000
        assert sum(len(e.model_dump_json()) for e in ctx.events) > 200_000

    def test_parts_restore_after_reopening(self, store: SessionStore, peer: SessionStore) -> None:
        """Another instance on the same sessions (a reopened file) loads the parts whole."""
        ctx = self._with_parts(store)
        loaded = AgentContext.deserialize(peer.load("s1").agent("root").context)
        assert loaded.messages == ctx.messages

    def test_snapshot_with_parts_round_trips(self, store: SessionStore) -> None:
        """A snapshot holding parts loads back exactly."""
        ctx = self._with_parts(store)
        message = ctx.messages[0].model_dump(mode="json")
        snapshot = {"seq": 10, "messages": [message, message]}
        store.put_snapshot("s1", "root", snapshot)
        loaded = store.load("s1", snapshots=True).agent("root")
        assert loaded.snapshot == snapshot
        if (payloads := self.stored_payloads(store)) is not None:
            data = message["content"][1]["data"]
            assert all(data[:100] not in text for text in payloads)

    def test_a_fork_shares_parts_and_keeps_them(self, store: SessionStore) -> None:
        """A fork reads the parts through; it keeps them when the original is deleted."""
        ctx = self._with_parts(store)
        count = self.stored_blob_count(store)
        store.fork("s1", "f1", at=20, root_agent_id="f")
        assert self.stored_blob_count(store) == count  # shared, not copied
        prefix = [e.model_dump(mode="json") for e in ctx.events[:21]]
        assert store.read_events("f1", "f") == prefix
        store.delete("s1")
        assert store.read_events("f1", "f") == prefix
        assert store.load("f1").agent("f").context["events"] == prefix
        store.delete("f1")
        assert self.stored_blob_count(store) in (None, 0)

    def test_deleting_a_session_keeps_blobs_others_use(self, store: SessionStore) -> None:
        """Blobs go with the last session that refers to them, not before."""
        self._with_parts(store, "s1")
        other = AgentContext("root", clock=counting_clock())
        other.add_message(UserMessage(content=["same", screenshot(3)]))
        store.create_session("s2", root_agent_id="root")
        store.put_agent("s2", AgentRecord("root", None, "spec", "idle"))
        store.append_events("s2", "root", other.events)
        store.delete("s1")
        assert self.stored_blob_count(store) in (None, 1)
        assert store.read_events("s2", "root") == [other.events[0].model_dump(mode="json")]
        store.delete("s2")
        assert self.stored_blob_count(store) in (None, 0)
