"""The pure half of blobs: parts' data out of an event's JSON text and back in."""

from __future__ import annotations

import json

import pytest

from actors import AgentContext, UserMessage
from actors.store._batch import decode_log, encode_events, externalize
from actors.store._blobs import referenced
from actors.store.conformance import sample_context, screenshot


def test_text_only_events_are_stored_as_they_are() -> None:
    batch = encode_events("s", "a", sample_context().events)
    stored, blobs = externalize(batch)
    assert blobs == {}
    assert all(a is b for a, b in zip(stored, batch, strict=True))  # not even copied


def test_a_payload_that_only_looks_like_a_part_is_left_alone() -> None:
    ctx = AgentContext("a")
    ctx.log_event("app.note", {"media_type": "image/png", "data": "not a part", "type": "x"})
    batch = encode_events("s", "a", ctx.events)
    stored, blobs = externalize(batch)
    assert (stored[0].data, blobs) == (batch[0].data, {})


def test_parts_leave_the_event_and_come_back_exactly() -> None:
    shot = screenshot(1)
    ctx = AgentContext("a")
    ctx.add_message(UserMessage(content=["look", shot, shot]))
    ctx.replace_message(0, UserMessage(content=[shot]))
    stored, blobs = externalize(encode_events("s", "a", ctx.events))
    assert list(blobs) == [shot.sha256]
    assert (blobs[shot.sha256].size, blobs[shot.sha256].data) == (shot.size, shot.data)
    assert shot.data is not None
    assert all(shot.data not in event.data for event in stored)
    ref = json.loads(stored[0].data)["content"][1]
    assert ref == {"type": "image", "media_type": "image/png", "blob": shot.sha256, "size": 1508}
    rows = [(e.seq, e.type, e.data, e.created_at) for e in stored]
    assert referenced(e.data for e in stored) == {shot.sha256}
    assert [e["data"] for e in decode_log(rows, blobs)] == [e.data for e in ctx.events]


def test_a_reference_to_a_missing_blob_is_a_damaged_row() -> None:
    ctx = AgentContext("a")
    ctx.add_message(UserMessage(content=["look", screenshot(1)]))
    stored, _ = externalize(encode_events("s", "a", ctx.events))
    rows = [(e.seq, e.type, e.data, e.created_at) for e in stored]
    with pytest.raises(ValueError, match="blob"):
        decode_log(rows, {})


def test_parts_anywhere_in_a_payload_are_kept_outside_it() -> None:
    """A peer message's parts, nested in any event, go to the blobs like a user message's."""
    shot = screenshot(2)
    ctx = AgentContext("a")
    part = shot.model_dump(mode="json")
    ctx.log_event(
        "app.peer", {"message": {"from": "b", "content": [{"type": "text", "text": "hi"}, part]}}
    )
    stored, blobs = externalize(encode_events("s", "a", ctx.events))
    assert list(blobs) == [shot.sha256]
    assert shot.data is not None
    assert shot.data not in stored[0].data
    rows = [(e.seq, e.type, e.data, e.created_at) for e in stored]
    assert decode_log(rows, blobs)[0]["data"] == ctx.events[0].data
