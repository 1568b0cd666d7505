"""Binary parts on the trace page: images as thumbnails (each once), the rest as placeholders.

An event's payload reaches the page without any part's base64: each part with data becomes
``{"type", "media_type", "size", "sha256", "placeholder", "name"?}``, plus ``"thumbnail"``
(its hash) when the page embeds it. The page embeds an image (PNG, JPEG, GIF or WebP) of at
most `MAX_IMAGE_BYTES`, each distinct one once, in a table of data URLs by hash, until the
images embedded reach `MAX_PAGE_IMAGE_BYTES`; any other part, and an image past either cap,
is shown as its placeholder (``[image image/png, 3.1 MB, shot.png]``). So a session with a
20 MB document, or a thousand screenshots, still makes a page a browser opens at once.
"""

from __future__ import annotations

from typing import Any, Final

from actors import AudioPart, BinaryPart, DocumentPart, ImagePart, describe_content

__all__ = ["MAX_IMAGE_BYTES", "MAX_PAGE_IMAGE_BYTES", "Media", "content_label"]

MAX_IMAGE_BYTES: Final = 2_000_000
"""The largest image (decoded bytes) the page embeds as a thumbnail."""

MAX_PAGE_IMAGE_BYTES: Final = 20_000_000
"""How many bytes of images (decoded, each distinct image once) one page embeds at most."""

_SHOWN: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_CLASSES: Final[dict[str, type[BinaryPart]]] = {
    "image": ImagePart,
    "audio": AudioPart,
    "document": DocumentPart,
}


class Media:
    """The images a page embeds, by hash, gathered while payloads are made page-ready."""

    def __init__(self) -> None:
        self.urls: dict[str, str] = {}
        self._bytes = 0

    def payload(self, value: Any) -> Any:
        """``value`` (an event's data) with every part's base64 replaced as described above.

        ``value`` itself (not a copy) when it holds no part with data: most events.
        """
        kind = type(value)
        if kind is dict:
            if value.get("type") in _CLASSES and type(value.get("data")) is str:
                return self._part(value["type"], value)
            out: dict[str, Any] | None = None
            for key, item in value.items():
                if type(item) is dict or type(item) is list:
                    shown = self.payload(item)
                    if shown is not item:
                        out = dict(value) if out is None else out
                        out[key] = shown
            return value if out is None else out
        if kind is list:
            copy: list[Any] | None = None
            for index, item in enumerate(value):
                if type(item) is dict or type(item) is list:
                    shown = self.payload(item)
                    if shown is not item:
                        copy = list(value) if copy is None else copy
                        copy[index] = shown
            return value if copy is None else copy
        return value

    def _part(self, kind: str, value: dict[str, Any]) -> dict[str, Any]:
        # Not validated again: the log's parts were checked when they entered it.
        part = _CLASSES[kind].model_construct(**value)
        shown: dict[str, Any] = {
            key: item for key, item in value.items() if key not in ("data", "url")
        }
        digest = part.sha256
        shown.update(size=part.size, sha256=digest, placeholder=describe_content((part,)))
        if digest in self.urls or self._embed(part, digest):
            shown["thumbnail"] = digest
        return shown

    def _embed(self, part: BinaryPart, digest: str) -> bool:
        if part.type != "image" or part.media_type not in _SHOWN:
            return False
        if part.size > MAX_IMAGE_BYTES or self._bytes + part.size > MAX_PAGE_IMAGE_BYTES:
            return False
        self._bytes += part.size
        self.urls[digest] = part.data_url()
        return True


def content_label(content: object) -> str:
    """A logged message's content as a label: its text, each binary part as a placeholder."""
    return describe_content(content, sep=" ")
