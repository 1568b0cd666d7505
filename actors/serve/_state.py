"""`Server`: what the routes of one served agent share, and the helpers they read requests with."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from actors import Agent, AgentRef, Runtime
from actors.context._parts import Content, InvalidContentError, coerce_content
from actors.exceptions import ActorsError, SessionNotFoundError
from actors.serve._api_error import ApiError
from actors.serve._errors import api_error_of
from actors.serve._runs import Runs
from actors.store import SessionStore, StoredSession

__all__ = ["SESSION_ID", "Server", "field_of", "server_of", "session_id_of", "wants_stream"]

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


@dataclass
class Server:
    """What the routes of one served agent share.

    Attributes:
        agent: The root spec every session runs.
        store: Where sessions live.
        runtime: The runtime that hosts them (set when the app starts).
        runs: The runs in flight and the streams of recent ones.
        tool_context: The static channel given to every session's tools; never sent.
        max_body: The largest request body accepted, in bytes.
    """

    agent: Agent[Any]
    store: SessionStore
    runtime: Runtime | None
    runs: Runs
    tool_context: Any = None
    max_body: int = 1 << 20
    # Sessions seen to be this agent's: a run need not load a whole session to check it again.
    owned: set[str] = field(default_factory=set)

    # -- sessions -----------------------------------------------------------------------------

    def check_id(self, session_id: str) -> str:
        """``session_id`` if it is a usable id; else `ApiError` 400."""
        if not SESSION_ID.fullmatch(session_id):
            raise ApiError(
                400,
                "bad_session_id",
                "a session id is 1 to 128 letters, digits, '.', '_', ':' or '-', starting "
                "with a letter or digit",
            )
        return session_id

    def load(self, session_id: str) -> StoredSession:
        """The stored session, if it is one of this agent's (blocking); else `ApiError` 404."""
        self.check_id(session_id)
        try:
            stored = self.store.load(session_id)
        except SessionNotFoundError:
            raise _not_found(session_id) from None
        if stored.data.get("agent") != self.agent.name:
            raise _not_found(session_id)
        self.owned.add(session_id)
        return stored

    def check(self, session_id: str) -> None:
        """`load`'s check that the session is one of this agent's, once per session."""
        if session_id not in self.owned:
            self.load(session_id)

    async def acheck(self, session_id: str) -> None:
        """`check` from the event loop."""
        if session_id not in self.owned:
            await run_in_threadpool(self.load, session_id)

    def open(self, session_id: str, *, create: bool = False, metadata: Any = None) -> AgentRef:
        """The session's root agent: live, woken from the store, or (``create``) new.

        Blocking: call it in a thread.
        """
        self.check_id(session_id)
        runtime = self._runtime()
        try:
            exists = _exists(self.store, session_id)
            if exists and create:
                raise ApiError(409, "session_exists", f"session {session_id!r} exists already")
            if not exists and not create:
                raise _not_found(session_id)
            ref = runtime.open_session(
                self.agent,
                session_id=session_id,
                store=self.store,
                tool_context=self.tool_context,
                metadata=metadata,
            )
            self.owned.add(session_id)
            return ref
        except ActorsError as exc:
            raise api_error_of(exc) from None

    def _runtime(self) -> Runtime:
        if self.runtime is None:
            raise ApiError(503, "not_started", "the server is starting or stopping")
        return self.runtime

    async def aopen(self, session_id: str) -> AgentRef:
        """`open` from the event loop, for an existing session."""
        return await run_in_threadpool(self.open, session_id)


def _exists(store: SessionStore, session_id: str) -> bool:
    try:
        store.last_seq(session_id, "")
    except SessionNotFoundError:
        return False
    return True


def _not_found(session_id: str) -> ApiError:
    return ApiError(
        404, "session_not_found", f"no session {session_id!r}; create one with POST /sessions"
    )


def server_of(request: Request) -> Server:
    server: Server = request.app.state.server
    return server


def session_id_of(request: Request) -> str:
    return server_of(request).check_id(str(request.path_params["session_id"]))


def wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


def field_of(body: Any, name: str, kind: type | tuple[type, ...], *, required: bool = False) -> Any:
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "the body must be a JSON object")
    value = body.get(name)
    if value is None:
        if required:
            raise ApiError(400, "invalid_body", f"the body needs {name!r}")
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ApiError(400, "invalid_body", f"{name!r} must be {_json_type(names)}")
    return value


def _json_type(python: str) -> str:
    names = {"str": "a string", "dict": "an object", "bool": "true or false", "list": "an array"}
    return names.get(python, python)


def content_of(body: Any, name: str) -> Content:
    """A required field holding content: a string, or an array of parts' JSON objects.

    A part is ``{"type": "text", "text": ...}`` or ``{"type": "image"|"audio"|"document",
    "media_type": ..., "data": <base64>}`` (or ``"url"``); bad content is a 400
    ``invalid_content`` that says what was wrong.
    """
    value = field_of(body, name, (str, list), required=True)
    try:
        return coerce_content(value, repr(name))
    except InvalidContentError as exc:
        raise ApiError(400, "invalid_content", str(exc)) from None
