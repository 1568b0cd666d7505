"""`CachedModel`: a real model's replies, recorded in a SQLite file and replayed offline.

The key of a reply is `request_key`: a hash of what the model sees (the messages' visible
content, the tools, the settings that reach it, the output schema, the inner model's name), not
of ids or hooks the framework adds; so two agents asking the same thing share a reply.

Recording is safe under concurrency. One connection, behind a lock, is the file's one writer
in a process; a request asked again while its first asking is still in flight waits for that
reply instead of asking the model twice; and every identical request of one `CachedModel`
gets one reply. That last rule is what makes a replay give the recorded run's bytes: a model
with a temperature could answer two identical requests differently, and the file can hold
only one answer. Several processes may share a file (SQLite's WAL mode and a busy timeout): a
key is written once, and in ``"auto"`` mode a process that loses the race to write a key uses
the reply that won, so its run is replayable too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import sqlite3
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from actors.context._messages import AssistantMessage
from actors.context._usage import Usage
from actors.exceptions import CacheMissError, UserError
from actors.models._cache_key import KEY_VERSION, remember, request_key
from actors.models._latency import Latency, check_latency, latency_of
from actors.models._model import Model, ModelFallback, ModelRequest, ModelResponse
from actors.models._test_support import wait

__all__ = ["CachedModel", "request_key"]

CacheMode = Literal["auto", "record", "replay"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response TEXT NOT NULL
)
"""

_READ_AT_ONCE = 100_000
"""A file holding at most this many replies is read into memory when opened."""

_BUSY_TIMEOUT_S = 30.0
"""How long a writer waits for another process's write to the same file."""


class _Stored(BaseModel):
    """A reply as the file holds it (JSON), read back in one validating pass."""

    model_config = ConfigDict(frozen=True)

    message: AssistantMessage
    usage: Usage
    model_name: str = ""
    finish_reason: str | None = None
    fallbacks: tuple[ModelFallback, ...] = ()


class _AskedInVain(Exception):
    """The first asker of a request got no reply (failed or cancelled): ask again."""


def _dump(response: ModelResponse) -> str:
    stored = _Stored(
        message=response.message,
        usage=response.usage,
        model_name=response.model_name,
        finish_reason=response.finish_reason,
        fallbacks=response.fallbacks,
    )
    return stored.model_dump_json()


def _load(text: str) -> ModelResponse:
    stored = _Stored.model_validate_json(text)
    return ModelResponse(
        message=stored.message,
        usage=stored.usage,
        model_name=stored.model_name,
        finish_reason=stored.finish_reason,
        fallbacks=stored.fallbacks,
    )


_DECODED_LIMIT = 10_000
"""Distinct reply texts kept decoded (by text) before that memo starts over."""


def _read(text: str, key: str, decoded: dict[str, ModelResponse]) -> ModelResponse:
    # Replies are immutable, and many repeat word for word (every agent's "ok"): a text is
    # validated once, and its reply (with its message's key text) shared by every request
    # that gets it, as a scripted model shares its replies.
    response = decoded.get(text)
    if response is not None:
        return response
    try:
        response = _load(text)
    except ValidationError as exc:
        raise CacheMissError(
            f"the cached reply of key {key[:12]}... cannot be read ({exc.error_count()} "
            "problems; was the file edited?); record it again with mode='record'"
        ) from exc
    remember(response.message)
    if len(decoded) >= _DECODED_LIMIT:
        decoded.clear()
    decoded[text] = response
    return response


def _open(path: str | Path) -> sqlite3.Connection:
    db = sqlite3.connect(
        str(path), check_same_thread=False, isolation_level=None, timeout=_BUSY_TIMEOUT_S
    )
    # WAL: readers never wait for the writer, a commit is an append (no journal file made and
    # removed per row), and other processes can share the file.
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(_SCHEMA)
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version == 0:
        if db.execute("SELECT 1 FROM replies LIMIT 1").fetchone() is not None:
            db.close()
            raise UserError(
                f"the cache file {str(path)!r} was recorded with an earlier key format, which "
                "this version of CachedModel cannot look up; record it again (a new file)"
            )
        db.execute(f"PRAGMA user_version = {KEY_VERSION}")
    elif version != KEY_VERSION:
        db.close()
        raise UserError(
            f"the cache file {str(path)!r} has key format {version}, this CachedModel makes "
            f"format {KEY_VERSION}; use the version of actors that recorded it, or record again"
        )
    return db


class CachedModel:
    """Wraps a model: its replies are recorded in a SQLite file and replayed from it.

    A simulation (or a test suite) that used a real model reruns offline, for free, and
    identically: point it at the same file in ``"replay"`` mode. Requests that differ only in
    what the model never sees (agent ids, tool-call id values, timeouts) share a reply; see
    `request_key`.

    Within one `CachedModel`, identical requests get one reply, asked once: concurrent ones
    (threads, coroutines, a simulation's requests in flight) wait for the first, later ones
    get it from memory or the file. So a recorded run and its replay see the same replies.
    A request whose model call failed records nothing.

    Args:
        inner: The real model (None is allowed in ``"replay"`` mode only).
        path: The SQLite file (created if missing); ``":memory:"`` keeps nothing.
        mode: ``"auto"`` replays what the file holds and asks ``inner`` (recording the reply)
            on a miss; ``"record"`` asks ``inner`` once for each distinct request, whatever
            the file holds, and records the reply over any older one; ``"replay"`` never asks
            it, and a miss is a `CacheMissError`.
        latency: Seconds a replayed reply takes (or a function of the request and a seeded
            `random.Random`), waited on a `Simulation`'s virtual clock or for real elsewhere.
        name: The model's name (by default the inner model's). Keys use the inner model's
            name, so give a replay-only model (``inner=None``) the recorded model's name.

    Raises:
        UserError: an unknown mode, no inner model outside replay mode, or a file recorded
            with another key format.

    Example:
        >>> from actors.testing import ScriptedModel
        >>> model = CachedModel(ScriptedModel(["hi"]), ":memory:")
        >>> model.name
        'scripted'
    """

    def __init__(
        self,
        inner: Model | None,
        path: str | Path,
        *,
        mode: CacheMode = "auto",
        latency: Latency = 0.0,
        name: str | None = None,
    ) -> None:
        if mode not in ("auto", "record", "replay"):
            raise UserError(f"CachedModel mode must be 'auto', 'record' or 'replay', got {mode!r}")
        if inner is None and mode != "replay":
            raise UserError(f"CachedModel needs an inner model to {mode} replies; pass one")
        if inner is not None and not callable(getattr(inner, "request", None)):
            raise UserError(f"CachedModel wraps a Model, got {type(inner).__name__}")
        self.inner = inner
        self.mode = mode
        self.latency = check_latency(latency)
        self._name = name or (inner.name if inner is not None else "cached")
        self._key_name = inner.name if inner is not None else self._name
        self._rng = random.Random(0)
        self._lock = threading.Lock()
        self._db = _open(path)
        # A file of moderate size is read into memory at once (outside "record" mode, which
        # looks up only what it recorded itself): a lookup is then a dict's, not a query's,
        # and a replayed step costs little more than a scripted one. Keys not found there
        # (another process may have recorded them since) are still looked up in the file.
        self._texts: dict[str, str] = {}
        self._decoded: dict[str, ModelResponse] = {}  # by text: see `_read`
        if mode != "record":
            count = int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])
            if count <= _READ_AT_ONCE:
                self._texts = dict(self._db.execute("SELECT key, response FROM replies"))
        # The replies this object recorded (identical requests get the same one) and the
        # model calls in flight (identical requests wait for them): the inner model is asked
        # at most once per key.
        self._recorded: dict[str, ModelResponse] = {}
        self._in_flight: dict[str, concurrent.futures.Future[ModelResponse]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        """Close the file (every recorded reply is in it already)."""
        with self._lock:
            self._db.close()

    # -- the cache ------------------------------------------------------------------------------

    def lookup(self, request: ModelRequest) -> ModelResponse | None:
        """The recorded reply to ``request``, or None (in ``"record"`` mode: recorded here)."""
        return self._known(request_key(request, self._key_name))

    def _known(self, key: str) -> ModelResponse | None:
        with self._lock:
            response = self._recorded.get(key)
            text = None
            if response is None and self.mode != "record":
                text = self._texts.get(key)
                if text is None:
                    row = self._db.execute(
                        "SELECT response FROM replies WHERE key = ?", (key,)
                    ).fetchone()
                    text = None if row is None else row[0]
        if text is not None:  # read outside the lock: other threads go on meanwhile
            response = _read(text, key, self._decoded)
        if response is not None:
            with self._lock:
                self.hits += 1
        return response

    def _store(self, key: str, response: ModelResponse) -> ModelResponse:
        """Record ``response``; the reply this key now has (another process's, if it won)."""
        text = _dump(response)
        with self._lock:
            if self.mode == "record":
                self._db.execute(
                    "INSERT OR REPLACE INTO replies (key, model, response) VALUES (?, ?, ?)",
                    (key, self._key_name, text),
                )
            else:
                written = self._db.execute(
                    "INSERT OR IGNORE INTO replies (key, model, response) VALUES (?, ?, ?)",
                    (key, self._key_name, text),
                ).rowcount
                if not written:  # another process recorded this key meanwhile: theirs holds
                    row = self._db.execute(
                        "SELECT response FROM replies WHERE key = ?", (key,)
                    ).fetchone()
                    if row is not None and row[0] != text:
                        response = _read(row[0], key, self._decoded)
            self._recorded[key] = response
        return response

    def _miss(self, request: ModelRequest) -> CacheMissError:
        with self._lock:
            self.misses += 1
        last = request.messages[-1] if request.messages else None
        excerpt = str(getattr(last, "content", ""))[:80]
        return CacheMissError(
            f"CachedModel (replay only) has no reply for this request of agent "
            f"{request.agent_id!r} (last message: {excerpt!r}); record it first with "
            "mode='auto' or 'record' and the real model"
        )

    async def _ask(self, key: str, request: ModelRequest, inner: Model) -> ModelResponse:
        """The inner model's reply to ``request``, asked once however many ask at once."""
        while True:
            with self._lock:
                response = self._recorded.get(key)
                if response is not None:
                    self.hits += 1
                    return response
                shared = self._in_flight.get(key)
                if shared is None:
                    mine: concurrent.futures.Future[ModelResponse] = concurrent.futures.Future()
                    self._in_flight[key] = mine
                    self.misses += 1
            if shared is None:
                break
            # Another thread or coroutine is asking the same: its reply is ours. Shielded,
            # so that giving up here never cancels the others' wait; if its call failed, ask
            # again (this request's own failure is its own).
            try:
                response = await asyncio.shield(asyncio.wrap_future(shared))
            except _AskedInVain:
                continue
            with self._lock:
                self.hits += 1
            return response
        try:
            response = self._store(key, await inner.request(request))
        except BaseException:
            with self._lock:
                del self._in_flight[key]
            # Not the error itself: a cancellation of the asker that went first is not the
            # others' (they were not cancelled), nor is its model error theirs to share.
            mine.set_exception(_AskedInVain())
            raise
        with self._lock:
            del self._in_flight[key]
        mine.set_result(response)
        return response

    # -- the Model protocol ---------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """The recorded reply, or (outside replay mode) the inner model's, recorded."""
        key = request_key(request, self._key_name)
        cached = self._known(key)
        if cached is not None:
            await wait(self.latency_for(request, self._rng), request)
            return cached
        if self.mode == "replay" or self.inner is None:
            raise self._miss(request)
        return await self._ask(key, request, self.inner)

    def respond_inline(self, request: ModelRequest) -> ModelResponse | None:
        """A recorded reply at once (no latency); None to go through `request`."""
        if self.latency != 0.0:
            return None
        cached = self.lookup(request)
        if cached is None and self.mode == "replay":
            raise self._miss(request)
        return cached

    def latency_for(self, request: ModelRequest, rng: random.Random) -> float:
        """The seconds a reply takes (a simulation waits them virtually)."""
        return latency_of(self.latency, request, rng)

    def respond_untimed(self, request: ModelRequest) -> Any:
        """The recorded reply at once; on a miss, a coroutine asking the inner model."""
        key = request_key(request, self._key_name)
        cached = self._known(key)
        if cached is not None:
            return cached
        if self.mode == "replay" or self.inner is None:
            raise self._miss(request)
        return self._ask(key, request, self.inner)

    def __repr__(self) -> str:
        return f"<CachedModel {self._name!r} mode={self.mode}>"
