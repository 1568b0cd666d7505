"""A process that makes the library log: a failing tool, a failing store, a failing model, a
provider call retried against a loopback server. Run by test_issue12_secrets.py and
test_issue16_quiet.py with the logging setup of an application (``MODE``).

    python logging_child.py MODE FOLDER

Every agent's ``tool_context`` holds ``SECRET``. What the process saw of the library (reprs,
exception messages and tracebacks, events, captured log entries) goes to FOLDER/report.txt and
the session store to FOLDER/sessions.sqlite; stdout and stderr hold only what the library (or
the logging setup) wrote.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import traceback
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import actors
from actors import Agent, RunContext, Runtime, tool
from actors.exceptions import ActorsError, StoreError
from actors.models import OpenAIChatModel, RetryPolicy
from actors.store import MemoryStore, SQLiteStore
from actors.testing import FunctionModel, ScriptedModel, allow_model_requests, call

SECRET = "sk-secret-tool-context-5e1f"
KEY = "sk-provider-key-9a7c"

MODES = (
    "quiet",
    "structlog-default",
    "structlog-capture",
    "stdlib",
    "stdlib-rich-locals",
    "actors-console",
    "actors-json",
)


def configure(mode: str, stack: ExitStack) -> list[Any] | None:
    """Set logging up as an application would; returns capture_logs' list in that mode."""
    if mode == "structlog-default":
        import structlog

        structlog.configure()  # the defaults: the dev console renderer, rich tracebacks
    elif mode == "structlog-capture":
        import structlog

        return stack.enter_context(structlog.testing.capture_logs())
    elif mode == "stdlib":
        logging.basicConfig(level=logging.DEBUG)
    elif mode == "stdlib-rich-locals":
        from rich.logging import RichHandler

        handler = RichHandler(rich_tracebacks=True, tracebacks_show_locals=True)
        logging.basicConfig(level=logging.DEBUG, handlers=[handler])
    elif mode in ("actors-console", "actors-json"):
        actors.configure_logging("DEBUG", format=mode.removeprefix("actors-"))  # type: ignore[arg-type]
    elif mode != "quiet":
        raise SystemExit(f"unknown mode {mode!r}")
    return None


class _Provider(BaseHTTPRequestHandler):
    """Fails the first request (500), answers the next ones."""

    protocol_version = "HTTP/1.1"
    calls = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        with _Provider.lock:
            _Provider.calls += 1
            first = _Provider.calls == 1
        if first:
            body = {"error": {"message": "overloaded, try again"}}
            self._send(500, body)
        else:
            self._send(
                200,
                {
                    "model": "m",
                    "choices": [
                        {"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                },
            )

    def _send(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the server is part of the test, not of what is checked


def main(mode: str, folder: Path) -> None:
    report: list[str] = []
    with ExitStack() as stack:
        captured = configure(mode, stack)
        report += scenarios(folder)
        if captured is not None:
            report.append(repr(captured))
    (folder / "report.txt").write_text("\n".join(report))


def scenarios(folder: Path) -> list[str]:
    report: list[str] = []
    tool_context = {"api_key": SECRET}

    @tool
    def lookup(ctx: RunContext[Any], query: str) -> str:
        """Look something up.

        Args:
            query: What to look up.
        """
        report.append(repr(ctx))
        raise RuntimeError(f"lookup of {query!r} failed")

    @tool
    def fine() -> str:
        """Succeed."""
        return "ok"

    class FailingStore(MemoryStore):
        """A store whose disk fills up after the first write."""

        writes = 0

        def append_events(self, session_id: str, agent_id: str, events: Any) -> None:
            FailingStore.writes += 1
            if FailingStore.writes > 1:
                raise StoreError("the disk is full")
            super().append_events(session_id, agent_id, events)

    def failing_model(messages: Any, tools: Any) -> str:
        raise RuntimeError("the model is down")

    def record(error: BaseException) -> None:
        report.extend([str(error), repr(error), *traceback.format_exception(error)])

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    provider = OpenAIChatModel(
        "m",
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
        api_key=KEY,
        retry=RetryPolicy(max_attempts=3, initial=0.001, max_delay=0.002, jitter=0),
    )
    with SQLiteStore(folder / "sessions.sqlite") as store, Runtime() as runtime:
        agents = [
            (
                "tool",
                Agent(
                    "a", model=ScriptedModel([call("lookup", query="q"), "done"]), tools=[lookup]
                ),
                store,
            ),
            (
                "store",
                Agent("b", model=ScriptedModel([call("fine"), "done"]), tools=[fine]),
                FailingStore(),
            ),
            ("model", Agent("c", model=FunctionModel(failing_model)), store),
            ("provider", Agent("d", model=provider), store),
        ]
        with allow_model_requests(True):
            for session_id, agent, agent_store in agents:
                ref = runtime.spawn(
                    agent, store=agent_store, session_id=session_id, tool_context=tool_context
                )
                try:
                    result = ref.run("go", timeout=10)
                    report += [repr(result), *(repr(m) for m in result.messages)]
                except ActorsError as error:
                    record(error)
                report += [repr(ref), repr(ref.tree())]
                report += [json.dumps(e.model_dump(mode="json")) for e in ref.context().events]
    server.shutdown()
    server.server_close()
    return report


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
