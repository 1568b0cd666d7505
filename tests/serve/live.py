"""A real uvicorn server on a loopback port, in a thread, for tests that need a socket."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) until the block ends; its base URL.

    The socket listens before the server starts, so a client may connect at once (the
    connection waits in the backlog until uvicorn accepts it).
    """
    # IPPROTO_TCP, as asyncio's own listeners: it sets TCP_NODELAY only on sockets that say so.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Parse server-sent events from a response's lines: dicts of id, event, data (JSON)."""
    import json

    event: dict[str, Any] = {}
    for line in lines:
        if not line:
            if "data" in event:
                event["data"] = json.loads(event["data"])
                yield event
            event = {}
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(": ")
            event[name] = int(value) if name == "id" else value
