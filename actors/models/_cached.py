"""`CachedModel`: a real model's replies, recorded in a SQLite file and replayed offline.

The key of a reply is a SHA-256 of the request as the model sees it (the messages, the tool
definitions, the settings, the output schema and the inner model's name), written as canonical
JSON; the agent's id is not part of it, so two agents asking the same thing share a reply.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from actors.context._messages import AssistantMessage
from actors.context._usage import Usage
from actors.exceptions import CacheMissError, UserError
from actors.models._latency import Latency, check_latency, latency_of
from actors.models._model import Model, ModelRequest, ModelResponse
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


def request_key(request: ModelRequest, model_name: str) -> str:
    """The cache key of ``request``: a SHA-256 of its canonical JSON (hex)."""
    payload = {
        "model": model_name,
        "messages": [m.model_dump(mode="json") for m in request.messages],
        "tools": [asdict(t) for t in request.tools],
        "settings": dict(request.settings),
        "output_schema": request.output_schema,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: valid text hashes exactly as before, and a request holding a lone
    # surrogate (a message built around validation, a tool's description) still has a key.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _dump(response: ModelResponse) -> str:
    return json.dumps(
        {
            "message": response.message.model_dump(mode="json"),
            "usage": response.usage.model_dump(),
            "model_name": response.model_name,
            "finish_reason": response.finish_reason,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def _load(text: str) -> ModelResponse:
    data = json.loads(text)
    return ModelResponse(
        message=AssistantMessage.model_validate(data["message"]),
        usage=Usage(**data["usage"]),
        model_name=data["model_name"],
        finish_reason=data["finish_reason"],
    )


class CachedModel:
    """Wraps a model: its replies are recorded in a SQLite file and replayed from it.

    A simulation (or a test suite) that used a real model reruns offline, for free, and
    identically: point it at the same file in ``"replay"`` mode.

    Args:
        inner: The real model (None is allowed in ``"replay"`` mode only).
        path: The SQLite file (created if missing).
        mode: ``"auto"`` replays what the file holds and asks ``inner`` (recording the reply)
            on a miss; ``"record"`` always asks ``inner`` and records; ``"replay"`` never asks
            it, and a miss is a `CacheMissError`.
        latency: Seconds a replayed reply takes (or a function of the request and a seeded
            `random.Random`), waited on a `Simulation`'s virtual clock or for real elsewhere.
        name: The model's name (by default the inner model's).

    Raises:
        UserError: an unknown mode, or no inner model outside replay mode.

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
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute(_SCHEMA)
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
        """Close the file."""
        with self._lock:
            self._db.close()

    # -- the cache ------------------------------------------------------------------------------

    def lookup(self, request: ModelRequest) -> ModelResponse | None:
        """The recorded reply to ``request``, or None."""
        if self.mode == "record":
            return None
        key = request_key(request, self._key_name)
        with self._lock:
            row = self._db.execute("SELECT response FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self.hits += 1
        return _load(row[0])

    def _store(self, request: ModelRequest, response: ModelResponse) -> None:
        key = request_key(request, self._key_name)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO replies (key, model, response) VALUES (?, ?, ?)",
                (key, self._key_name, _dump(response)),
            )

    def _miss(self, request: ModelRequest) -> CacheMissError:
        self.misses += 1
        last = request.messages[-1] if request.messages else None
        excerpt = str(getattr(last, "content", ""))[:80]
        return CacheMissError(
            f"CachedModel (replay only) has no reply for this request of agent "
            f"{request.agent_id!r} (last message: {excerpt!r}); record it first with "
            "mode='auto' or 'record' and the real model"
        )

    # -- the Model protocol ---------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """The recorded reply, or (outside replay mode) the inner model's, recorded."""
        cached = self.lookup(request)
        if cached is not None:
            await wait(self.latency_for(request, self._rng), request)
            return cached
        if self.mode == "replay" or self.inner is None:
            raise self._miss(request)
        self.misses += 1
        response = await self.inner.request(request)
        self._store(request, response)
        return response

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
        cached = self.lookup(request)
        if cached is not None:
            return cached
        if self.mode == "replay" or self.inner is None:
            raise self._miss(request)
        inner = self.inner

        async def ask() -> ModelResponse:
            self.misses += 1
            response = await inner.request(request)
            self._store(request, response)
            return response

        return ask()

    def __repr__(self) -> str:
        return f"<CachedModel {self._name!r} mode={self.mode}>"
