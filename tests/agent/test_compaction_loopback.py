"""A 2,000-message session against a loopback provider whose window is small.

The server (bench/wire_server.py, ``max_input_chars``) refuses any request over its window with
OpenAI's ``context_length_exceeded``: compaction must keep every request under it, the
summaries must cover exactly what each ``compacted`` event shadows, and a process that dies
while a summary is being written must go on after a restore.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from actors import Agent, AgentContext, Compaction, ModelRequest, ModelResponse, Runtime
from actors.loop._compaction import SUMMARY_PREFIX, render_transcript
from actors.models import OpenAIChatModel, RetryPolicy
from actors.models._model import allow_model_requests
from actors.store import SQLiteStore
from bench.wire_server import serve, stats

from .compaction_helpers import is_summary

FAST = RetryPolicy(max_attempts=2, initial=0.001, max_delay=0.005, jitter=0)
MAX_CHARS = 8_000  # the server's window, in characters of JSON (about 2,000 of its tokens)
TURNS = 1_000  # a user message and a reply each: 2,000 messages


class Recording(OpenAIChatModel):
    """The loopback model; records summary requests, and can hold one until released."""

    def __init__(self, url: str) -> None:
        super().__init__("loopback", base_url=url, retry=FAST)
        self.summaries: list[ModelRequest] = []
        self.hold: threading.Event | None = None
        self.held = threading.Event()

    async def request(self, request: ModelRequest) -> ModelResponse:
        if is_summary(request):
            self.summaries.append(request)
            hold = self.hold
            if hold is not None:
                self.held.set()
                await asyncio.to_thread(hold.wait, 30)  # the process dies meanwhile
        return await super().request(request)


def assistant(model: Any) -> Agent[str]:
    return Agent(
        "assistant",
        model=model,
        system_prompt="You are a long-lived assistant.",
        context_window=MAX_CHARS // 4,
        compaction=Compaction(at=0.8, keep_last_turns=4),
    )


def prompt(n: int) -> str:
    return f"message {n}: please note item {n * 7 % 101}"


def check_summaries(events: list[Any], summaries: list[ModelRequest]) -> int:
    """Each summary request carried exactly the messages its event shadows; returns the count."""
    compactions = [e for e in events if e.type == "compacted"]
    assert len(compactions) == len(summaries)
    for event, request in zip(compactions, summaries, strict=True):
        before = AgentContext.from_events(events[: event.seq]).messages
        first, last, kept = event.data["first"], event.data["last"], event.data["kept"]
        shadowed = [before[n] for n in range(first, last + 1) if n not in kept]
        assert request.messages[1].content.endswith(render_transcript(shadowed, None)) or (
            # a range too long for one request is sent cut short, message by message
            event.data.get("fallback") is None
            and all(m.content[:20] in request.messages[1].content for m in shadowed)
        )
    return len(compactions)


def test_a_long_session_never_sends_a_request_over_the_window(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    # Only loopback is reached; a suite-wide switch-off of real requests must not stop it.
    with allow_model_requests(True), serve(max_input_chars=MAX_CHARS) as url:
        model = Recording(url)
        # The first stretch, then the process dies while a summary is being written.
        runtime = Runtime()
        try:
            ref = runtime.spawn(assistant(model), store=store, session_id="long")
            n = 0
            while True:
                if len(model.summaries) >= 8:
                    model.hold = threading.Event()
                    future = ref.run_async(prompt(n))
                    # Either the run ends, or its summary is held: whichever comes first.
                    future.add_done_callback(lambda _: model.held.set())
                    assert model.held.wait(10)
                    if not future.done():
                        break  # the summary of this request is in flight
                    assert future.result(10).status == "completed"
                    model.held.clear()
                    model.hold = None
                else:
                    assert ref.run(prompt(n), timeout=10).status == "completed"
                n += 1
        finally:
            runtime.shutdown()
            if model.hold is not None:
                model.hold.set()
        died_at = n
        held = len(model.summaries)
        model.hold = None
        # Restored: the interrupted turn is closed, and the next request compacts first.
        with Runtime() as runtime:
            ref = runtime.restore("long", store=store, agents=[assistant(model)])
            for n in range(died_at + 1, TURNS):
                assert ref.run(prompt(n), timeout=10).status == "completed"
            ctx = ref.context()
        counters = stats(url)
    assert counters["rejected"] == 0
    assert counters["max_input_chars"] <= MAX_CHARS
    all_events = list(ctx.events)
    # The summary that was in flight at the crash logged nothing; it was asked again.
    done = [e for e in all_events if e.type == "compacted"]
    assert len(done) == len(model.summaries) - 1
    assert held - 1 == len([e for e in done if e.seq < _restore_seq(all_events)])
    summaries = [s for i, s in enumerate(model.summaries) if i != held - 1]
    assert check_summaries(all_events, summaries) > 20
    logged = [e.data["content"] for e in all_events if e.type == "user_message"]
    assert logged == [prompt(n) for n in range(TURNS)]  # every message kept in the log
    assert ctx.message_count < 100
    assert ctx.messages[1].content.startswith(SUMMARY_PREFIX)


def _restore_seq(events: list[Any]) -> int:
    return next(e.seq for e in events if e.type == "recovered")
