"""A model provider on loopback: the OpenAI and Anthropic wire formats, in a process of its own.

Tests and benchmarks of real models need what users run: a model behind HTTP, with latency,
jitter, rate limiting and replies that come back out of order. This server gives that without
leaving the machine, and runs in its own process so that it is never the bottleneck of what
it measures.

    python -m bench.wire_server --latency 0.2 --jitter 0.05 --fail-rate 0.05

prints ``READY <port>`` on its first line, then serves until killed. From Python, `serve` starts
one and yields its base URL::

    with serve(latency=0.2) as url:            # "http://127.0.0.1:PORT/v1"
        OpenAIChatModel("fake", base_url=url)
        AnthropicModel("fake", base_url=url[:-3])   # the Anthropic path is /v1/messages

Replies are a pure function of the request body (its messages and tools), so the same request
always gets the same reply, whatever order the replies go back in:

- a request that offers tools and whose last message is not a tool result (or the attachments
  that follow one) calls the first tool,
  with arguments made from its schema (an ``enum`` gives one of its values, picked by the
  request's digest; a string gives a word of the digest; numbers, booleans and arrays simple
  values);
- otherwise it answers in text: ``"reply <digest>: <the last message, cut to 40 chars>"``.

With ``--fail-rate`` a request is refused with ``429`` and ``retry-after-ms`` (an attempt's
fate is drawn from the digest and the attempt's number for that body, so the same request
fails the same way in every run). With ``--max-input-chars N`` a request whose messages (and
system prompt) take more than N characters of JSON is refused with ``400`` and the provider's
"context too long" error (OpenAI's ``context_length_exceeded``, Anthropic's "prompt is too
long"), as a model with a small window would. ``GET /stats`` returns counters: requests,
failures, rejections, in flight now and at most, tokens, the largest input accepted, and TCP
connections (accepted in all, and open now), and the last parts received (kind, media
type, size and SHA-256 of the bytes).

Images, audio and files are checked as a provider would (see `bench.wire_parts`): a malformed
or truncated image, a media type or part the format does not take, a text-only message
holding parts, is refused with ``400`` in the provider's error shape; an Anthropic request
over 32 MB with ``413``. A body of any size is read (a 20 MB PDF arrives whole). With
``--cache`` the server reports prompt caching as the providers do: the system prompt and
tools of a request (for Anthropic, only when they carry ``cache_control``) count as a cached
prefix, written the first time it is seen (Anthropic's ``cache_creation_input_tokens``) and
read every later time (OpenAI's ``prompt_tokens_details.cached_tokens``, Anthropic's
``cache_read_input_tokens``). Anthropic requests stream too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.wire_parts import Refused, Seen, check_anthropic, check_openai

_ROOT = Path(__file__).resolve().parent.parent


class _Stats:
    def __init__(self) -> None:
        self.requests = 0
        self.failures = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.connections = 0
        self.open_connections = 0
        self.rejected = 0
        self.max_input_chars = 0
        self.refused_content = 0
        self.parts: list[Seen] = []  # the last parts received
        self.attempts: Counter[str] = Counter()

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "failures": self.failures,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "connections": self.connections,
            "open_connections": self.open_connections,
            "rejected": self.rejected,
            "max_input_chars": self.max_input_chars,
            "refused_content": self.refused_content,
            "parts": [part.as_json() for part in self.parts],
        }


_MESSAGES_JSON = "\x00messages_json"  # where a body keeps its messages' JSON, made once


def _messages_json(body: dict[str, Any]) -> str:
    """The request's messages as JSON text, made once per request (a 20 MB PDF is in it)."""
    text = body.get(_MESSAGES_JSON)
    if text is None:
        text = body[_MESSAGES_JSON] = json.dumps(body.get("messages") or [])
    return str(text)


def _digest(body: dict[str, Any]) -> str:
    key = {"system": body.get("system"), "tools": body.get("tools")}
    text = json.dumps(key, sort_keys=True, ensure_ascii=True) + "\n" + _messages_json(body)
    return hashlib.sha256(text.encode()).hexdigest()


def _value(schema: dict[str, Any], digest: str, n: int) -> Any:
    if schema.get("enum"):
        return schema["enum"][int(digest[n : n + 8], 16) % len(schema["enum"])]
    kind = schema.get("type")
    if kind == "integer":
        return int(digest[n : n + 2], 16)
    if kind == "number":
        return int(digest[n : n + 2], 16) / 4
    if kind == "boolean":
        return int(digest[n], 16) % 2 == 0
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return f"w{digest[n : n + 6]}"


def _arguments(schema: dict[str, Any], digest: str) -> dict[str, Any]:
    properties = schema.get("properties", {})
    return {
        name: _value(properties.get(name, {}), digest, 2 * i)
        for i, name in enumerate(schema.get("required", []))
    }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _openai_reply(body: dict[str, Any], digest: str) -> tuple[dict[str, Any], int, int]:
    messages = body.get("messages") or [{}]
    last = messages[-1]
    tools = body.get("tools") or []
    tokens_in = max(1, len(_messages_json(body)) // 4)
    message: dict[str, Any]
    # A tool's result is the last message, or followed by the user message that carries its
    # attachments (tool messages take text only): either way the tool was answered.
    answered = last.get("role") == "tool" or (
        len(messages) > 1 and last.get("role") == "user" and messages[-2].get("role") == "tool"
    )
    if tools and not answered:
        function = tools[0]["function"]
        arguments = _arguments(function.get("parameters", {}), digest)
        call = {
            "id": f"call_{digest[:12]}",
            "type": "function",
            "function": {"name": function["name"], "arguments": json.dumps(arguments)},
        }
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        tokens_out = 10
    else:
        text = f"reply {digest[:8]}: {_text_of(last.get('content'))[:40]}"
        message, finish = {"role": "assistant", "content": text}, "stop"
        tokens_out = max(1, len(text) // 4)
    reply = {
        "id": f"chatcmpl-{digest[:16]}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }
    return reply, tokens_in, tokens_out


def _anthropic_reply(body: dict[str, Any], digest: str) -> tuple[dict[str, Any], int, int]:
    messages = body.get("messages") or [{}]
    last = messages[-1]
    content = last.get("content")
    answered = isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "tool_result" for part in content
    )
    tools = body.get("tools") or []
    tokens_in = max(1, len(_messages_json(body)) // 4)
    blocks: list[dict[str, Any]]
    if tools and not answered:
        tool = tools[0]
        blocks = [
            {
                "type": "tool_use",
                "id": f"toolu_{digest[:12]}",
                "name": tool["name"],
                "input": _arguments(tool.get("input_schema", {}), digest),
            }
        ]
        stop, tokens_out = "tool_use", 10
    else:
        text = f"reply {digest[:8]}: {_text_of(content)[:40]}"
        blocks, stop, tokens_out = [{"type": "text", "text": text}], "end_turn", len(text) // 4
    reply = {
        "id": f"msg_{digest[:16]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": max(1, tokens_out)},
    }
    return reply, tokens_in, max(1, tokens_out)


def _openai_stream(reply: dict[str, Any]) -> bytes:
    choice = reply["choices"][0]
    message = choice["message"]
    base = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks: list[dict[str, Any]] = []
    if message.get("tool_calls"):
        calls = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
        chunks.append({"role": "assistant", "tool_calls": calls})
    else:
        text = message["content"]
        chunks.append({"role": "assistant", "content": ""})
        chunks.extend({"content": text[i : i + 8]} for i in range(0, len(text), 8))
    events = [
        dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
        for delta in chunks
    ]
    events.append(
        dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}])
    )
    events.append(dict(base, choices=[], usage=reply["usage"]))
    lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


def _anthropic_stream(reply: dict[str, Any]) -> bytes:
    usage = reply["usage"]
    start = {k: v for k, v in reply.items() if k not in ("content", "stop_reason")}
    start = dict(start, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(reply["content"]):
        opened: dict[str, Any]
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        else:
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": None}
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _cache_prefix(body: dict[str, Any], openai: bool) -> tuple[str, int] | None:
    """The cacheable prefix of a request (its system prompt and tools): digest and tokens."""
    tools = body.get("tools") or []
    if openai:
        system = [m for m in body.get("messages") or () if m.get("role") in ("system", "developer")]
    else:
        system = body.get("system") or []
        marked = isinstance(system, list) and any("cache_control" in b for b in system)
        if not (marked or any("cache_control" in tool for tool in tools)):
            return None  # Anthropic caches only up to a breakpoint
    if not (system or tools):
        return None
    text = json.dumps([system, tools], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest(), max(1, len(text) // 4)


def _error(openai: bool, message: str, status: int) -> bytes:
    """The provider's error body for a request it refuses."""
    if openai:
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
        return json.dumps({"error": error}).encode()
    kind = "request_too_large" if status == 413 else "invalid_request_error"
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


class _Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.latency = args.latency
        self.jitter = args.jitter
        self.fail_rate = args.fail_rate
        self.retry_after_ms = args.retry_after_ms
        self.max_input_chars = args.max_input_chars
        self.cache = args.cache
        self.prefixes: set[str] = set()
        self.rng = random.Random(args.seed)
        self.stats = _Stats()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        self.stats.open_connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(length) if length else b""
                status, extra, payload, kind = await self.respond(method, path, raw)
                reason = {
                    200: "OK",
                    400: "Bad Request",
                    404: "Not Found",
                    413: "Request Entity Too Large",
                    429: "Too Many Requests",
                }
                out = [f"HTTP/1.1 {status} {reason.get(status, 'OK')}", f"Content-Type: {kind}"]
                out += [f"{k}: {v}" for k, v in extra.items()]
                out.append(f"Content-Length: {len(payload)}")
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + payload)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self.stats.open_connections -= 1
            with contextlib.suppress(Exception):
                writer.close()

    async def respond(
        self, method: str, path: str, raw: bytes
    ) -> tuple[int, dict[str, str], bytes, str]:
        json_type = "application/json"
        if method == "GET" and path.endswith("/stats"):
            return 200, {}, json.dumps(self.stats.as_json()).encode(), json_type
        openai = path.endswith("/chat/completions")
        if method != "POST" or not (openai or path.endswith("/messages")):
            return 404, {}, b'{"error": {"message": "not found"}}', json_type
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {}, b'{"error": {"message": "malformed JSON"}}', json_type
        stats = self.stats
        stats.requests += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            delay = self.latency + (
                self.rng.uniform(-self.jitter, self.jitter) if self.jitter else 0
            )
            await asyncio.sleep(max(0.0, delay))
            digest = _digest(body)
            attempt = stats.attempts[digest]
            stats.attempts[digest] += 1
            if self.fail_rate and _fails(digest, attempt, self.fail_rate):
                stats.failures += 1
                error = {"error": {"message": "rate limited (test server)", "type": "rate_limit"}}
                headers = {"retry-after-ms": str(self.retry_after_ms)}
                return 429, headers, json.dumps(error).encode(), json_type
            size = _input_chars(body)
            if self.max_input_chars and size > self.max_input_chars:
                stats.rejected += 1
                return 400, {}, _too_long(openai, size, self.max_input_chars), json_type
            if not openai and len(raw) > 32 * 1024 * 1024:
                stats.refused_content += 1
                message = f"request exceeds the maximum size of 32 MB: {len(raw)} bytes"
                return 413, {}, _error(openai, message, 413), json_type
            try:
                parts = check_openai(body) if openai else check_anthropic(body)
            except Refused as refused:
                stats.refused_content += 1
                return refused.status, {}, _error(openai, str(refused), refused.status), json_type
            stats.parts = (stats.parts + parts)[-20:]
            stats.max_input_chars = max(stats.max_input_chars, size)
            if openai:
                reply, tokens_in, tokens_out = _openai_reply(body, digest)
            else:
                reply, tokens_in, tokens_out = _anthropic_reply(body, digest)
            if self.cache:
                self._report_cache(body, openai, reply, tokens_in)
            stats.input_tokens += tokens_in
            stats.output_tokens += tokens_out
            if body.get("stream"):
                stream = _openai_stream(reply) if openai else _anthropic_stream(reply)
                return 200, {}, stream, "text/event-stream"
            return 200, {}, json.dumps(reply).encode(), json_type
        finally:
            stats.in_flight -= 1

    def _report_cache(
        self, body: dict[str, Any], openai: bool, reply: dict[str, Any], tokens_in: int
    ) -> None:
        prefix = _cache_prefix(body, openai)
        read = write = 0
        if prefix is not None:
            digest, tokens = prefix
            tokens = min(tokens, tokens_in)
            if digest in self.prefixes:
                read = tokens
            else:
                self.prefixes.add(digest)
                write = tokens
        usage = reply["usage"]
        if openai:
            usage["prompt_tokens_details"] = {"cached_tokens": read}  # no writes reported
        else:
            # Anthropic's input_tokens leaves out what was read from or written to the cache.
            usage["input_tokens"] = max(0, tokens_in - read - write)
            usage["cache_read_input_tokens"] = read
            usage["cache_creation_input_tokens"] = write


def _input_chars(body: dict[str, Any]) -> int:
    """The size of a request's input as this server measures windows: JSON characters."""
    size = len(_messages_json(body))
    system = body.get("system")
    return size + (len(json.dumps(system)) if system else 0)


def _too_long(openai: bool, size: int, limit: int) -> bytes:
    """The provider's error body for a request over the window."""
    if openai:
        error = {
            "message": f"This model's maximum context length is {limit // 4} tokens. However, "
            f"your messages resulted in {size // 4} tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        return json.dumps({"error": error}).encode()
    message = f"prompt is too long: {size // 4} tokens > {limit // 4} maximum"
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return json.dumps(body).encode()


def _fails(digest: str, attempt: int, rate: float) -> bool:
    draw = hashlib.sha256(f"{digest}:{attempt}".encode()).digest()
    return int.from_bytes(draw[:4], "big") / 2**32 < rate


async def _main(args: argparse.Namespace) -> None:
    server = _Server(args)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", args.port, backlog=4096)
    port = listener.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)
    async with listener:
        await listener.serve_forever()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.wire_server", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--jitter", type=float, default=0.0, help="+/- seconds, uniform")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of attempts: 429")
    parser.add_argument("--retry-after-ms", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="seeds the jitter")
    parser.add_argument(
        "--max-input-chars", type=int, default=0, help="refuse longer inputs as too long (0: no)"
    )
    parser.add_argument(
        "--cache", action="store_true", help="report prompt caching of system prompts and tools"
    )
    return parser


@contextlib.contextmanager
def serve(
    *,
    latency: float = 0.0,
    jitter: float = 0.0,
    fail_rate: float = 0.0,
    retry_after_ms: int = 20,
    seed: int = 0,
    max_input_chars: int = 0,
    cache: bool = False,
) -> Iterator[str]:
    """Start a server in a child process; yield its base URL (``http://127.0.0.1:N/v1``)."""
    command = [
        sys.executable,
        "-m",
        "bench.wire_server",
        f"--latency={latency}",
        f"--jitter={jitter}",
        f"--fail-rate={fail_rate}",
        f"--retry-after-ms={retry_after_ms}",
        f"--seed={seed}",
        f"--max-input-chars={max_input_chars}",
        *(["--cache"] if cache else []),
    ]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")])),
    )
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=_ROOT, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"the wire server did not start (it printed {line!r})")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def stats(base_url: str) -> dict[str, Any]:
    """The server's counters (``GET /stats``)."""
    import httpx

    return httpx.get(f"{base_url}/stats", timeout=10).json()  # type: ignore[no-any-return]


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(_parser().parse_args()))
