"""A Chat Completions server on loopback that behaves like `actors.testing.TestModel`.

On the first request of a run (no tool result after the last user message) it calls every
tool offered, with arguments made from each tool's schema; then it answers in text. That is
enough to drive the demo's whole tree — fan-out, approval, writer — over real HTTP.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_EXAMPLES = {"string": "a", "integer": 0, "number": 0.0, "boolean": False, "array": []}


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties", {})
    return {
        name: _EXAMPLES.get(properties[name].get("type"), "a")
        for name in schema.get("required", [])
    }


def reply_to(body: dict[str, Any]) -> dict[str, Any]:
    """The ``chat.completion`` for a request body."""
    messages = body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    answered = any(m["role"] == "tool" for m in messages[last_user:])
    tools = body.get("tools", [])
    message: dict[str, Any]
    if tools and not answered:
        calls = [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {
                    "name": t["function"]["name"],
                    "arguments": json.dumps(_arguments(t["function"]["parameters"])),
                },
            }
            for n, t in enumerate(tools)
        ]
        message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": "fake answer"}, "stop"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("stream"):
            self.send_error(400, "this fake server does not stream")
            return
        payload = json.dumps(reply_to(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet


@contextmanager
def fake_openai() -> Iterator[str]:
    """Serve on a free loopback port; yields the base URL (``http://127.0.0.1:N/v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
