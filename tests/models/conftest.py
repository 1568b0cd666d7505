"""Fixtures for the model tests: a scripted HTTP server on loopback, and model requests on.

The server runs in a thread on 127.0.0.1, port 0. A test gives it a script: one reply per
request it will receive, in order. It records every request (path, headers, JSON body) so
tests can check what went over the wire.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from actors.models._model import allow_model_requests

# How long a scripted server thread may wait for a test's signal before giving up, so a
# failing test can never leave a thread behind.
_BOUND = 10.0


@pytest.fixture(autouse=True)
def _model_requests_allowed() -> Iterator[None]:
    # These tests only ever talk to loopback; a suite-wide switch-off must not stop them.
    with allow_model_requests(True):
        yield


@dataclass
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    client_port: int


Reply = Callable[["_Handler"], None]


@dataclass
class LoopbackServer:
    """The server a test talks to, with its script and what it received."""

    url: str
    replies: list[Reply] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    request_received: threading.Event = field(default_factory=threading.Event)
    disconnected: threading.Event = field(default_factory=threading.Event)
    first_chunk_sent: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``, in order."""
        with self.lock:
            self.replies.extend(replies)

    def next_reply(self) -> Reply | None:
        with self.lock:
            return self.replies.pop(0) if self.replies else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = _BOUND  # an idle keep-alive connection ends by itself
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        state = self.server.state
        headers = {name.lower(): value for name, value in self.headers.items()}
        with state.lock:
            state.received.append(
                Received("POST", self.path, headers, body, self.client_address[1])
            )
        state.request_received.set()
        reply = state.next_reply()
        if reply is None:
            send_json(self, 599, {"error": "the test scripted no reply for this request"})
            return
        try:
            reply(self)
        except (BrokenPipeError, ConnectionResetError):
            state.disconnected.set()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


class _Server(ThreadingHTTPServer):
    state: LoopbackServer
    request_queue_size = 128  # concurrent-request tests open many connections at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-reply is what several tests do on purpose


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    host, port = httpd.server_address[:2]
    httpd.state = LoopbackServer(url=f"http://{host}:{port}")
    # A short poll interval only makes shutdown() at teardown quick.
    thread = threading.Thread(
        target=httpd.serve_forever, args=(0.01,), name="loopback-http", daemon=True
    )
    thread.start()
    try:
        yield httpd.state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(_BOUND)


# -- replies -----------------------------------------------------------------------------


def send_json(
    handler: _Handler, status: int, body: Any, headers: dict[str, str] | None = None
) -> None:
    send_raw(handler, status, json.dumps(body).encode(), "application/json", headers)


def send_raw(
    handler: _Handler,
    status: int,
    payload: bytes,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(payload)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(payload)
    handler.wfile.flush()


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    return lambda handler: send_json(handler, status, body, headers)


def raw_reply(status: int, payload: bytes, content_type: str = "application/json") -> Reply:
    return lambda handler: send_raw(handler, status, payload, content_type)


def _chunk(handler: _Handler, data: bytes) -> None:
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()


def sse_reply(events: list[str], *, drop_after: int | None = None) -> Reply:
    """Stream ``events`` (each a complete SSE event text) in chunked encoding.

    With ``drop_after=n`` the connection closes abruptly after ``n`` events, without the
    chunked terminator, like a proxy or server dying mid-reply.
    """

    def reply(handler: _Handler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        for n, event in enumerate(events):
            if drop_after is not None and n == drop_after:
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            _chunk(handler, event.encode())
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()

    return reply


def stalled_stream_reply(first_events: list[str]) -> Reply:
    """Send some events, then wait until the client goes away (or the test ends)."""

    def reply(handler: _Handler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        for event in first_events:
            _chunk(handler, event.encode())
        state = handler.server.state
        state.first_chunk_sent.set()
        _wait_for_disconnect(handler)

    return reply


def stalled_reply() -> Reply:
    """Send nothing at all until the client goes away or the test ends (a slow server)."""
    return _wait_for_disconnect


def _wait_for_disconnect(handler: _Handler) -> None:
    sock = handler.connection
    sock.settimeout(_BOUND)
    try:
        # A closed client reads as EOF; the test ending releases us through the timeout.
        if sock.recv(1) == b"":
            handler.server.state.disconnected.set()
    except OSError:
        handler.server.state.disconnected.set()
    handler.close_connection = True


def sse_event(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {text}\n\n"


class Wire:
    """The reply builders, handed to tests by the ``wire`` fixture."""

    json = staticmethod(json_reply)
    send_json = staticmethod(send_json)
    raw = staticmethod(raw_reply)
    sse = staticmethod(sse_reply)
    stalled = staticmethod(stalled_reply)
    stalled_stream = staticmethod(stalled_stream_reply)
    event = staticmethod(sse_event)


@pytest.fixture
def wire() -> type[Wire]:
    return Wire
