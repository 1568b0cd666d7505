"""What the loopback wire server checks of a request's images, audio and files, as a provider would.

Each wire format's content is walked (OpenAI Chat Completions' content parts, Anthropic's
content blocks); a part the provider would refuse raises `Refused` with the status and the
message the provider's error would carry. Images are decoded and checked past their first
bytes (a PNG must end with its IEND chunk, a JPEG with its end marker, a GIF with its trailer):
a truncated image passes a client's sniff of its magic bytes, and a provider refuses it.
Every accepted part is recorded (kind, media type, size and SHA-256 of its bytes) so tests
can check what arrived.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any

__all__ = ["ANTHROPIC_IMAGE_LIMIT", "Refused", "Seen", "check_anthropic", "check_openai"]

MB = 1024 * 1024
ANTHROPIC_IMAGE_LIMIT = 5 * MB
OPENAI_IMAGE_LIMIT = 20 * MB
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_AUDIO_FORMATS = ("wav", "mp3")


class Refused(Exception):
    """The request holds content the provider would refuse: its status and message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Seen:
    """One accepted part, as the server received it."""

    kind: str
    media_type: str
    size: int
    sha256: str

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "media_type": self.media_type,
            "size": self.size,
            "sha256": self.sha256,
        }


def _decode(data: Any, what: str) -> bytes:
    if not isinstance(data, str) or not data:
        raise Refused(f"{what}: the data must be non-empty base64 text")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise Refused(f"{what}: the data is not valid base64") from None


def _check_image(raw: bytes, media_type: str, limit: int) -> None:
    if media_type not in _IMAGE_TYPES:
        raise Refused(f"Invalid image media type {media_type!r}; use one of {_IMAGE_TYPES}")
    if len(raw) > limit:
        raise Refused(f"image exceeds {limit // MB} MB maximum: {len(raw)} bytes")
    whole = {
        "image/png": raw.startswith(b"\x89PNG\r\n\x1a\n") and raw[-8:-4] == b"IEND",
        "image/jpeg": raw.startswith(b"\xff\xd8\xff") and raw.endswith(b"\xff\xd9"),
        "image/gif": raw[:6] in (b"GIF87a", b"GIF89a") and raw.endswith(b";"),
        "image/webp": raw[:4] == b"RIFF" and raw[8:12] == b"WEBP",
    }[media_type]
    if not whole:
        raise Refused("Could not process image: the image data is invalid or truncated")


def _seen(kind: str, media_type: str, raw: bytes) -> Seen:
    return Seen(kind, media_type, len(raw), hashlib.sha256(raw).hexdigest())


def _data_url(url: str, what: str) -> tuple[str, bytes]:
    head, comma, data = url.partition(",")
    if not comma or not head.startswith("data:") or not head.endswith(";base64"):
        raise Refused(f"{what}: expected a base64 data: URL")
    return head[len("data:") : -len(";base64")], _decode(data, what)


def check_openai(body: dict[str, Any]) -> list[Seen]:
    """Check a Chat Completions body's content parts; the parts it holds."""
    seen: list[Seen] = []
    for n, message in enumerate(body.get("messages") or ()):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        if message.get("role") not in ("user", "tool", "system", "developer", "assistant"):
            raise Refused(f"messages[{n}]: unknown role {message.get('role')!r}")
        for i, part in enumerate(content):
            where = f"messages[{n}].content[{i}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                continue
            if message.get("role") != "user":
                raise Refused(f"{where}: a {message.get('role')} message takes text parts only")
            if kind == "image_url":
                url = str((part.get("image_url") or {}).get("url") or "")
                if url.startswith(("http://", "https://")):
                    continue  # the provider would fetch it
                media_type, raw = _data_url(url, where)
                _check_image(raw, media_type, OPENAI_IMAGE_LIMIT)
                seen.append(_seen("image", media_type, raw))
            elif kind == "input_audio":
                audio = part.get("input_audio") or {}
                audio_format = audio.get("format")
                if audio_format not in _AUDIO_FORMATS:
                    raise Refused(f"{where}: audio format must be wav or mp3, not {audio_format!r}")
                raw = _decode(audio.get("data"), where)
                if audio_format == "wav" and not (raw[:4] == b"RIFF" and raw[8:12] == b"WAVE"):
                    raise Refused(f"{where}: the audio is not a WAV file")
                media_type = "audio/wav" if audio_format == "wav" else "audio/mpeg"
                seen.append(_seen("audio", media_type, raw))
            elif kind == "file":
                file = part.get("file") or {}
                media_type, raw = _data_url(str(file.get("file_data") or ""), where)
                if media_type != "application/pdf" or not raw.startswith(b"%PDF-"):
                    raise Refused(f"{where}: only PDF files are supported, got {media_type!r}")
                if not file.get("filename"):
                    raise Refused(f"{where}: a file needs a filename")
                seen.append(_seen("document", media_type, raw))
            else:
                raise Refused(f"{where}: invalid content part type {kind!r}")
    return seen


def _anthropic_source(block: dict[str, Any], where: str) -> tuple[str, bytes] | None:
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "url":
        if not str(source.get("url") or "").startswith(("http://", "https://")):
            raise Refused(f"{where}.source.url: must be an http(s) URL")
        return None
    if kind == "text" and block.get("type") == "document":
        if source.get("media_type") != "text/plain" or not isinstance(source.get("data"), str):
            raise Refused(f"{where}.source: a text source takes media_type text/plain and data")
        return "text/plain", source["data"].encode()
    if kind != "base64":
        raise Refused(f"{where}.source.type: unknown source type {kind!r}")
    return str(source.get("media_type") or ""), _decode(source.get("data"), f"{where}.source")


def _anthropic_block(block: Any, where: str, seen: list[Seen], *, in_result: bool) -> None:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind in ("text", "tool_use") or (kind == "tool_result" and not in_result):
        if kind == "text" and not block.get("text"):
            raise Refused(f"{where}: text content blocks must be non-empty")
        if kind == "tool_result" and isinstance(block.get("content"), list):
            for i, inner in enumerate(block["content"]):
                _anthropic_block(inner, f"{where}.content[{i}]", seen, in_result=True)
        return
    if kind == "image":
        found = _anthropic_source(block, where)
        if found is not None:
            _check_image(found[1], found[0], ANTHROPIC_IMAGE_LIMIT)
            seen.append(_seen("image", *found))
        return
    if kind == "document" and not in_result:
        found = _anthropic_source(block, where)
        if found is not None:
            media_type, raw = found
            if media_type == "application/pdf" and not raw.startswith(b"%PDF-"):
                raise Refused(f"{where}: the PDF specified was not valid")
            if media_type not in ("application/pdf", "text/plain"):
                raise Refused(f"{where}: unsupported document media type {media_type!r}")
            seen.append(_seen("document", media_type, raw))
        return
    raise Refused(f"{where}: unexpected content block type {kind!r}")


def check_anthropic(body: dict[str, Any]) -> list[Seen]:
    """Check a Messages body's content blocks; the parts it holds."""
    seen: list[Seen] = []
    for n, message in enumerate(body.get("messages") or ()):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        results_done = False
        for i, block in enumerate(content):
            is_result = isinstance(block, dict) and block.get("type") == "tool_result"
            if is_result and results_done:
                raise Refused(
                    f"messages[{n}].content[{i}]: tool_result blocks must come first in a "
                    "user message"
                )
            results_done = results_done or not is_result
            _anthropic_block(block, f"messages[{n}].content[{i}]", seen, in_result=False)
    return seen
