"""Binary parts kept once, by hash, outside the events that hold them (SQLite and Postgres).

A part with data (an image, audio or a document: ``{"type": "image", "media_type": ...,
"data": "<base64>"}``) is written to the store's ``blobs`` table, keyed by the SHA-256 of its
base64 text; the stored event holds a reference in its place::

    {"type": "image", "media_type": "image/png", "blob": "<sha256>", "size": 51234}

Reading puts the data back, so everything above the store sees the part exactly as written.
The same content in many events, agents, sessions or forks is stored once. The blobs hold the
base64 text itself (what every provider's wire format takes, and what the hash is of): read
back with no encoding, byte for byte.

Both directions are pure functions of the JSON text and values (`actors.store._batch`'s
``externalize`` applies them to a batch); the stores do the SQL. An
event without parts costs two substring searches of its JSON text, nothing more: the search
for ``"media_type":"`` (a JSON key, so never inside a string, where its quotes are escaped)
finds every candidate, and only those are parsed and walked.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "Blob",
    "externalize_text",
    "may_hold_parts",
    "has_refs",
    "inline",
    "referenced",
]

_KINDS: Final = frozenset({"image", "audio", "document"})
_PART_MARK: Final = '"media_type":"'
_DATA_MARK: Final = '"data":"'
_REF_MARK: Final = '"blob":"'
_REF: Final = re.compile(r'"blob":"([0-9a-f]{64})"')
_HASH: Final = re.compile(r"[0-9a-f]{64}")
_encoder = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Blob:
    """The content of a binary part, as a store keeps it.

    Attributes:
        hash: The hex SHA-256 of ``data`` (the part's ``sha256``).
        media_type: The part's media type when first stored.
        size: The size in bytes of the decoded content.
        data: The base64 text.
    """

    hash: str
    media_type: str
    size: int
    data: str


def _size(data: str) -> int:
    return len(data) * 3 // 4 - data.endswith("=") - data.endswith("==")


def _is_part(value: Mapping[str, Any]) -> bool:
    return (
        value.get("type") in _KINDS
        and type(value.get("data")) is str
        and type(value.get("media_type")) is str
        and "blob" not in value
    )


def _strip(value: Any, found: dict[str, Blob], stripped: list[int]) -> Any:
    """``value`` with every part's data replaced by a reference; its blobs added to ``found``."""
    if type(value) is dict:
        if _is_part(value):
            data: str = value["data"]
            digest = hashlib.sha256(data.encode("ascii")).hexdigest()
            if digest not in found:
                found[digest] = Blob(digest, value["media_type"], _size(data), data)
            stripped[0] += 1
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key == "data":
                    out["blob"] = digest
                    out["size"] = found[digest].size
                else:
                    out[key] = item
            return out
        return {key: _strip(item, found, stripped) for key, item in value.items()}
    if type(value) is list:
        return [_strip(item, found, stripped) for item in value]
    return value


def may_hold_parts(text: str) -> bool:
    """Whether a JSON text may hold a part with data (two substring searches)."""
    return _PART_MARK in text and _DATA_MARK in text


def externalize_text(text: str, found: dict[str, Blob]) -> str:
    """One JSON text (an event's payload, a snapshot) with its parts' data as references.

    Args:
        text: The JSON text, as the store encoded it.
        found: Where the blobs of the parts are added, by hash.

    Returns:
        ``text`` itself when it holds no part with data (the common case: no parse), else
        the text of the value with each part's data replaced by a reference.
    """
    if not may_hold_parts(text):
        return text
    stripped: list[int] = [0]
    value = _strip(json.loads(text), found, stripped)
    return text if not stripped[0] else _encoder.encode(value)


def has_refs(text: str) -> bool:
    """Whether a stored JSON text may refer to blobs (a cheap substring search)."""
    return _REF_MARK in text


def referenced(texts: Iterable[object]) -> set[str]:
    """The hashes of the blobs that stored JSON texts refer to."""
    hashes: set[str] = set()
    for text in texts:
        if isinstance(text, str) and _REF_MARK in text:
            hashes.update(_REF.findall(text))
    return hashes


def _restore(value: Any, blobs: Mapping[str, Blob]) -> Any:
    if type(value) is dict:
        ref = value.get("blob")
        if type(ref) is str and value.get("type") in _KINDS and _HASH.fullmatch(ref):
            blob = blobs.get(ref)
            if blob is None:
                raise ValueError(f"a part refers to blob {ref[:12]}…, which the store lacks")
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key == "blob":
                    out["data"] = blob.data
                elif key != "size":
                    out[key] = item
            return out
        return {key: _restore(item, blobs) for key, item in value.items()}
    if type(value) is list:
        return [_restore(item, blobs) for item in value]
    return value


def inline(value: Any, blobs: Mapping[str, Blob]) -> Any:
    """A decoded payload with every reference replaced by its part's data.

    Raises:
        ValueError: A reference names a blob missing from ``blobs`` (the store is damaged).
    """
    return _restore(value, blobs)
