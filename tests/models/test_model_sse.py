"""The server-sent events reader, fed the awkward chunkings a network produces."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from actors.models._sse import ServerSentEvent, iter_sse


def events(*chunks: str) -> list[ServerSentEvent]:
    async def source() -> AsyncIterator[str]:
        for chunk in chunks:
            yield chunk

    async def collect() -> list[ServerSentEvent]:
        return [event async for event in iter_sse(source())]

    return asyncio.run(collect())


def test_named_and_unnamed_events() -> None:
    assert events("event: ping\ndata: {}\n\ndata: [DONE]\n\n") == [
        ServerSentEvent("ping", "{}"),
        ServerSentEvent("message", "[DONE]"),
    ]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_every_line_ending(ending: str) -> None:
    text = f"event: a{ending}data: 1{ending}{ending}data: 2{ending}{ending}"
    assert events(text) == [ServerSentEvent("a", "1"), ServerSentEvent("message", "2")]


def test_crlf_split_across_chunks_is_one_line_ending() -> None:
    assert events("data: 1\r", "\n\r", "\ndata: 2\r\n\r\n") == [
        ServerSentEvent("message", "1"),
        ServerSentEvent("message", "2"),
    ]


def test_one_character_at_a_time() -> None:
    text = "event: x\r\ndata: héllo\r\n\r\n"
    assert events(*text) == [ServerSentEvent("x", "héllo")]


def test_comments_multiline_data_and_unknown_fields() -> None:
    text = ": keep-alive\nid: 7\nretry: 100\ndata: a\ndata:b\nfoo: bar\n\n"
    assert events(text) == [ServerSentEvent("message", "a\nb")]


def test_unicode_line_separators_inside_data_are_not_line_endings() -> None:
    text = 'data: {"t": "a\u2028b\u0085c\x1cd"}\n\n'
    assert events(text) == [ServerSentEvent("message", '{"t": "a\u2028b\u0085c\x1cd"}')]


def test_last_event_without_blank_line() -> None:
    assert events("data: tail") == [ServerSentEvent("message", "tail")]


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert events("\n\nevent: lonely\n\n") == []
