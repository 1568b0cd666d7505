"""`request_key`: what identifies a model request for `CachedModel`, and only that.

A key covers what the model sees and what changes its reply: the messages' visible content,
the tool definitions, the settings that reach the model, the output schema and the model's
name. It leaves out what the framework or the provider makes up along the way: the agent's id,
the run's cancellation and streaming hooks, transport settings (``timeout``, ``stream``), and
the values of tool-call ids (they are arbitrary strings; only which result answers which call
counts, so a call's id is replaced by its order of first appearance). Messages carry no
timestamps; event timestamps never reach a request.

Computing a key must cost little beside a scripted model: a replayed simulation looks one up
at every step, and an agent's transcript grows with every step. An agent's request carries a
view of its append-only transcript (`MessageView`, which names the transcript and its length),
so the digest of the transcript so far is kept, and the next request hashes only the messages
added since: a step costs what its new messages cost, not the whole transcript. Other
sequences of messages (after history processors, or built by hand) are hashed whole, with
each message's text remembered by object. Both ways give the same key.

A part with binary content (an image, a 20 MB PDF) is keyed by its SHA-256, not its base64:
the remembered texts stay small, and a key costs one hash of the content per part object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import fields
from typing import Any

from pydantic_core import PydanticSerializationError

from actors._text import clean_json
from actors.context._message_view import MessageView
from actors.context._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from actors.context._parts import BinaryPart
from actors.models._model import ModelRequest, ToolDefinition

__all__ = ["KEY_VERSION", "remember", "request_key"]

KEY_VERSION = 2
"""The key format; a cache file records the version its keys were made with."""

_TRANSPORT = frozenset({"timeout", "stream"})
"""Settings that change how a reply travels, never what it says."""

_MEMO_LIMIT = 50_000
"""Canonical texts remembered (by message object) before the memo starts over."""

# id(object) -> (object, text, ids): the object is held so that its id is not reused while
# its entry lives. Shared by every CachedModel; a race between threads costs a recomputation.
_messages: dict[int, tuple[Message, bytes, tuple[str, ...]]] = {}
_tools: dict[int, tuple[ToolDefinition, bytes]] = {}
_heads: dict[str, bytes] = {}
# id(tools) -> (tools, model name, prefix): an agent's loop passes the same tuple every step.
_prefixes: dict[int, tuple[Sequence[ToolDefinition], str, bytes]] = {}
# (log id, generation, first, head) -> (length, digest state, call-id ordinals) of an agent's
# transcript as far as it was hashed: the next request hashes only what was added.
_Chain = tuple[int, Any, dict[str, int]]
_chains: dict[tuple[int, int, int, bytes], _Chain] = {}
_CHAINS_LIMIT = 50_000


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_NO_CALL_IDS: Any = {"tool_calls": {"__all__": {"id"}}}
_NO_RESULT_ID: Any = {"tool_call_id"}


def _canonical(message: Message) -> tuple[Message, bytes, tuple[str, ...]]:
    """The message's JSON without its tool-call ids, and those ids in order."""
    ids: tuple[str, ...] = ()
    exclude: Any = None
    kind = type(message)
    if kind is UserMessage or kind is SystemMessage:  # the most frequent: no ids, no checks
        pass
    elif isinstance(message, AssistantMessage):
        if message.tool_calls:
            ids = tuple(call.id for call in message.tool_calls)
            exclude = _NO_CALL_IDS
    elif isinstance(message, ToolResultMessage):
        ids = (message.tool_call_id,)
        exclude = _NO_RESULT_ID
    # Fields in the order the message classes declare them; tool arguments in the order the
    # model gave them (a replayed reply gives them in that order again). The serializer's
    # bytes as they are (`model_dump_json` decodes them to text, which was encoded again).
    content = message.content
    if type(content) is tuple and any(getattr(part, "data", None) for part in content):
        return message, _with_digests(message, exclude), ids
    serializer = kind.__pydantic_serializer__
    try:
        if exclude is None:  # no `exclude=None` either: passing it costs as much as the dump
            return message, serializer.to_json(message), ids
        return message, serializer.to_json(message, exclude=exclude), ids
    except PydanticSerializationError:
        # A message built around validation may hold a lone surrogate, which JSON cannot: it
        # is keyed as the text rule would have let it in (U+FFFD in its place).
        text = json.dumps(
            clean_json(message.model_dump(mode="python", exclude=exclude)),
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return message, text.encode(), ids


def _with_digests(message: Message, exclude: Any) -> bytes:
    """The message's JSON with each part's base64 content replaced by its SHA-256."""
    dumped = message.model_dump(mode="python", exclude=exclude)  # strings by reference
    parts = message.content
    assert isinstance(parts, tuple)
    dumped["content"] = [
        {**data, "data": "sha256:" + part.sha256} if isinstance(part, BinaryPart) else data
        for part, data in zip(parts, dumped["content"], strict=True)
    ]
    return _dumps(clean_json(dumped)).encode("utf-8", "surrogatepass")


def _remembered(message: Message) -> tuple[Message, bytes, tuple[str, ...]]:
    entry = _messages.get(id(message))
    if entry is None or entry[0] is not message:
        entry = _canonical(message)
        if len(_messages) >= _MEMO_LIMIT:
            _messages.clear()
        _messages[id(message)] = entry
    return entry


def remember(message: Message) -> None:
    """Keep ``message``'s canonical text: it will be hashed again (a reply shared by agents)."""
    _remembered(message)


def _looked_up(message: Message) -> tuple[Message, bytes, tuple[str, ...]]:
    """The message's canonical text, remembered if it was, computed (not kept) otherwise."""
    entry = _messages.get(id(message))
    if entry is not None and entry[0] is message:
        return entry
    return _canonical(message)


def _add(
    state: Any,
    entries: Iterable[tuple[Message, bytes, tuple[str, ...]]],
    order: dict[str, int],
) -> None:
    """Hash each message's text, then (on a line of their own) its call ids' ordinals."""
    for _, text, ids in entries:
        state.update(text)
        state.update(b"\n")
        if ids:  # "@0,1": a line that no message's JSON text can be
            ordinals = ",".join(str(order.setdefault(call_id, len(order))) for call_id in ids)
            state.update(f"@{ordinals}\n".encode())


def _digest_all(messages: Sequence[Message]) -> bytes:
    """Every message hashed (a list or tuple of messages, e.g. after history processors)."""
    state = hashlib.sha256()
    _add(state, map(_remembered, messages), {})
    return state.digest()


def _digest_view(view: MessageView, origin: tuple[int, int, int]) -> bytes:
    """An agent's transcript hashed from where its previous request's hashing stopped."""
    head = view.head
    head_text = b""
    if head is not None:
        # A head is made anew for each request (instructions over the logged system prompt):
        # not worth remembering by object.
        _, head_text, head_ids = _canonical(head)
        if head_ids:  # a head with tool calls is not worth a shortcut
            return _digest_all(view)
    first = 0 if view.hidden is None else 1
    log_id, generation, stop = origin
    name = (log_id, generation, first, head_text)
    chain = _chains.get(name)
    if chain is None or chain[0] > stop:
        state = hashlib.sha256()
        if head is not None:
            state.update(head_text)
            state.update(b"\n")
        start, order = first, {}
    else:
        start, state, order = chain[0], chain[1].copy(), dict(chain[2])
    _add(state, map(_looked_up, view.transcript_since(start)), order)
    if len(_chains) >= _CHAINS_LIMIT:
        _chains.clear()
    _chains[name] = (stop, state, order)  # never updated again: later requests copy it
    return state.digest()


def _tool_text(tool: ToolDefinition) -> bytes:
    # Each agent's loop has its own tuple of definitions, but the definitions are shared.
    entry = _tools.get(id(tool))
    if entry is not None and entry[0] is tool:
        return entry[1]
    # The fields as they are: `asdict` would deep-copy the schema first (a tenth of a
    # millisecond for each agent's definitions), to the same text.
    text = _dumps({field.name: getattr(tool, field.name) for field in fields(tool)}).encode(
        "utf-8", "surrogatepass"
    )
    if len(_tools) >= 4096:
        _tools.clear()
    _tools[id(tool)] = (tool, text)
    return text


def request_key(request: ModelRequest, model_name: str) -> str:
    """The cache key of ``request`` to the model named ``model_name`` (SHA-256, hex).

    Two requests get the same key when they differ only in what the model never sees or
    what carries no meaning for it: the agent's id, cancellation, streaming hooks, transport
    settings (``timeout``, ``stream``) and the values of tool-call ids (their pattern counts:
    which result answers which call).

    Example:
        >>> from actors import ModelRequest, UserMessage
        >>> one = ModelRequest(messages=(UserMessage(content="hi"),), agent_id="a-1")
        >>> two = ModelRequest(messages=(UserMessage(content="hi"),), agent_id="b-7")
        >>> request_key(one, "gpt") == request_key(two, "gpt")
        True
    """
    tools = request.tools
    if request.settings or request.output_schema is not None:
        prefix = _prefix(_head(model_name, request), tools)
    else:  # the usual case: nothing but the name and the agent's tools, the same every step
        memo = _prefixes.get(id(tools))
        if memo is not None and memo[0] is tools and memo[1] == model_name:
            prefix = memo[2]
        elif type(tools) is not tuple:  # a list may change before the next request
            prefix = _prefix(_heads.get(model_name) or _head(model_name, request), tools)
        else:
            head = _heads.get(model_name)
            if head is None:
                head = _heads.setdefault(model_name, _head(model_name, request))
            prefix = _prefix(head, tools)
            if len(_prefixes) >= _MEMO_LIMIT:
                _prefixes.clear()
            _prefixes[id(tools)] = (tools, model_name, prefix)
    messages = request.messages
    origin = messages.origin if isinstance(messages, MessageView) else None
    if isinstance(messages, MessageView) and origin is not None:
        return hashlib.sha256(prefix + _digest_view(messages, origin)).hexdigest()
    return hashlib.sha256(prefix + _digest_all(messages)).hexdigest()


def _prefix(head: bytes, tools: Sequence[ToolDefinition]) -> bytes:
    """What the key hashes before the messages' digest: the head, the tools, a separator."""
    return b"\n".join([head, *map(_tool_text, tools), b"--", b""])


def _head(model_name: str, request: ModelRequest) -> bytes:
    settings = {k: v for k, v in request.settings.items() if k not in _TRANSPORT}
    head = {
        "v": KEY_VERSION,
        "model": model_name,
        "settings": settings,
        "output_schema": request.output_schema,
    }
    return _dumps(head).encode("utf-8", "surrogatepass")
