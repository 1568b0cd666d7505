"""Parts of a message: text, images, audio and documents, as bytes with a media type or a URL.

A user message, a tool result and a peer message hold either a string or a sequence of parts.
Binary content is kept as base64 text (what every provider's wire format wants, so nothing is
encoded twice) with its SHA-256, by which stores keep it once, outside the event that refers
to it (see `actors.store._blobs`).

Bad content is refused at the door, before it can enter a log that every later request of a
session would carry: a media type that does not name the part's kind, bytes that do not match
the image format they claim, base64 that does not decode, a URL that is not http(s).
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
import re
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from actors._text import Text
from actors.exceptions import UserError

__all__ = [
    "BINARY_KINDS",
    "AudioPart",
    "BinaryPart",
    "Content",
    "ContentInput",
    "DocumentPart",
    "ImagePart",
    "InvalidContentError",
    "Part",
    "TextPart",
    "coerce_content",
    "content_json",
    "content_size",
    "content_text",
    "describe_content",
    "file_part",
    "part_class",
]

BINARY_KINDS: Final = frozenset({"image", "audio", "document"})
"""The kinds of part that carry bytes or a URL."""

_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$")

# The first bytes of each image format providers take: a PNG claimed by a JPEG's bytes is
# refused here, not by the provider on every later request of the session.
_IMAGE_MAGIC: Final[dict[str, tuple[bytes, ...]]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),  # and b"WEBP" at offset 8, checked below
}
_PDF_MAGIC: Final = b"%PDF-"
_IMAGE_TOKENS: Final = 1600
_PDF_PAGE_TOKENS: Final = 2000
_CHARS_PER_TOKEN: Final = 4


class InvalidContentError(UserError, ValueError):
    """A part's content is not what it claims (media type, bytes, base64 or URL)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Frozen):
    """Text, as one part of a message.

    Attributes:
        text: The text.
    """

    type: Literal["text"] = "text"
    text: Text


class BinaryPart(_Frozen):
    """Bytes with a media type, or a URL: the shared shape of images, audio and documents.

    Give exactly one of ``data`` (the bytes, or their base64 text) and ``url`` (an http(s)
    URL, or a ``data:`` URL, which is read as ``data`` and ``media_type``).

    Attributes:
        media_type: The IANA media type, like ``image/png`` or ``application/pdf``.
        data: The content as base64 text (bytes given here are encoded), or None for a URL.
        url: Where the provider fetches the content, or None for inline data.
        name: An optional file name, shown to people and sent where a provider takes one.
    """

    type: str
    media_type: str = ""
    data: str | None = None
    url: Text | None = None
    name: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _read_input(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        values = dict(values)
        url = values.get("url")
        if isinstance(url, str) and url.startswith("data:"):
            media_type, encoded = _split_data_url(url)
            values.pop("url")
            values["data"] = encoded
            values.setdefault("media_type", media_type)
        # The content is checked here, where its form is known: bytes given are encoded (and
        # need no base64 check), base64 text is checked once.
        data = values.get("data")
        given = values.get("media_type")
        media_type = given.strip().lower() if isinstance(given, str) else ""
        if media_type:
            if not _MEDIA_TYPE.fullmatch(media_type):
                raise ValueError(f"{media_type!r} is not a media type; give one like 'image/png'")
            values["media_type"] = media_type
            # Before the bytes: the kind is the likelier slip.
            _check_kind(cls.model_fields["type"].default, media_type)
        if isinstance(data, bytes | bytearray | memoryview):
            raw = bytes(data)
            if not raw:
                raise ValueError("a part's data is empty; give the file's bytes")
            _check_format(media_type, raw[:12])
            values["data"] = base64.b64encode(raw).decode("ascii")
        elif isinstance(data, str):
            if not data:
                raise ValueError("a part's data is empty; give the file's bytes")
            if _invalid_base64(data):
                raise ValueError("a part's data is not valid base64; give the raw bytes instead")
            _check_format(media_type, base64.b64decode(data[:16]))
        return values

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError(
                f"a part's url must be http(s) or a data: URL, got {value[:40]!r}; "
                "give local content as data=<bytes>"
            )
        return value

    @model_validator(mode="after")
    def _check(self) -> BinaryPart:
        # The media type and the bytes were checked as they came in (`_read_input`).
        if (self.data is None) == (self.url is None):
            raise ValueError(f"a {self.type} part takes exactly one of data= and url=")
        if self.data is not None and not self.media_type:
            raise ValueError(f"a {self.type} part given as data needs its media_type")
        return self

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Logged parts leave out what they do not have: no "url": null beside the data.
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if value is not None}

    @cached_property
    def bytes(self) -> bytes:
        """The decoded bytes (empty for a URL part)."""
        return b"" if self.data is None else base64.b64decode(self.data)

    @cached_property
    def size(self) -> int:
        """The size in bytes of the content (0 for a URL part), computed without decoding it."""
        if self.data is None:
            return 0
        data = self.data
        return len(data) * 3 // 4 - data.endswith("=") - data.endswith("==")

    @cached_property
    def sha256(self) -> str:
        """The hex SHA-256 of the base64 text (stores keep the content once, by this key)."""
        if self.data is None:
            return hashlib.sha256(self.url.encode()).hexdigest()  # type: ignore[union-attr]
        return hashlib.sha256(self.data.encode("ascii")).hexdigest()

    @cached_property
    def tokens(self) -> int:
        """A rough upper estimate of the input tokens the part costs a model.

        An image: 1,600 (what providers bill a full-size image at most); audio: one token per
        kilobyte; a PDF: 2,000 a page; other documents: a token per four bytes. A provider's
        reported usage calibrates it per agent, like text's estimate.
        """
        if self.type == "image":
            return _IMAGE_TOKENS
        if self.type == "audio":
            return max(1, self.size // 1000)
        if self.media_type == "application/pdf" and self.data is not None:
            return _PDF_PAGE_TOKENS * max(1, _pdf_pages(self.bytes))
        return max(1, self.size // 4)

    def data_url(self) -> str:
        """The content as a ``data:`` URL (the URL itself for a URL part)."""
        if self.data is None:
            return self.url  # type: ignore[return-value]
        return f"data:{self.media_type};base64,{self.data}"

    def __repr__(self) -> str:
        where = f"url={self.url!r}" if self.url is not None else f"{self.size} bytes"
        return f"{type(self).__name__}({self.media_type or '?'}, {where})"

    __str__ = __repr__


class ImagePart(BinaryPart):
    """An image: PNG, JPEG, GIF or WebP bytes (checked against the media type), or a URL."""

    type: Literal["image"] = "image"


class AudioPart(BinaryPart):
    """Audio: bytes with an ``audio/*`` media type (``audio/wav``, ``audio/mpeg``), or a URL."""

    type: Literal["audio"] = "audio"


class DocumentPart(BinaryPart):
    """A document: a PDF, plain text or another file type, as bytes or a URL."""

    type: Literal["document"] = "document"


Part: TypeAlias = Annotated[
    TextPart | ImagePart | AudioPart | DocumentPart, Field(discriminator="type")
]
"""One part of a message; the ``type`` field tells which."""

Content: TypeAlias = str | tuple[Part, ...]
"""What a user message, a tool result or a peer message holds: text, or a sequence of parts."""

ContentInput: TypeAlias = "str | TextPart | BinaryPart | Sequence[str | TextPart | BinaryPart]"
"""What a caller may give as content: a str, one part, or a sequence of strs and parts."""

_PART_CLASSES: Final = (TextPart, ImagePart, AudioPart, DocumentPart)
_CLASS_OF: Final[dict[str, type[BinaryPart]]] = {
    "image": ImagePart,
    "audio": AudioPart,
    "document": DocumentPart,
}


def _split_data_url(url: str) -> tuple[str, str]:
    head, comma, encoded = url.partition(",")
    if not comma or not head.endswith(";base64"):
        raise ValueError("a data: URL must be base64 ('data:<media type>;base64,<data>')")
    return head[len("data:") : -len(";base64")], encoded


def _check_kind(kind: str, media_type: str) -> None:
    major = media_type.partition("/")[0]
    if kind == "image" and major != "image":
        raise ValueError(f"an image part needs an image/* media type, got {media_type!r}")
    if kind == "audio" and major != "audio":
        raise ValueError(f"an audio part needs an audio/* media type, got {media_type!r}")
    if kind == "document" and major in ("image", "audio"):
        use = "ImagePart" if major == "image" else "AudioPart"
        raise ValueError(f"{media_type!r} is not a document; use {use}")


def _check_format(media_type: str, head: bytes) -> None:
    """Refuse bytes (their first 12) that do not start the way their media type's format does."""
    magic = _IMAGE_MAGIC.get(media_type)
    if magic is not None and not (
        head.startswith(magic) and (media_type != "image/webp" or head[8:12] == b"WEBP")
    ):
        raise ValueError(
            f"the bytes are not a {media_type.partition('/')[2].upper()} image "
            f"(they start {head[:8]!r}); check the file or its media type"
        )
    if media_type == "application/pdf" and not head.startswith(_PDF_MAGIC):
        raise ValueError(f"the bytes are not a PDF (they start {head[:8]!r})")


def _pdf_pages(data: bytes) -> int:
    """The pages of a PDF, counted by their ``/Type /Page`` objects (a scan in C)."""
    pages = 0
    for spaced in (b"/Type /Page", b"/Type/Page"):
        pages += data.count(spaced) - data.count(spaced + b"s")
    return pages


_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _invalid_base64(data: str) -> bool:
    # A scan in C over the whole text: 20 MB of base64 checks in a few milliseconds.
    return len(data) % 4 != 0 or _BASE64.fullmatch(data) is None


def file_part(
    source: bytes | str | Path, media_type: str | None = None, *, name: str | None = None
) -> ImagePart | AudioPart | DocumentPart:
    """A part for a file's content, its kind chosen by its media type.

    Args:
        source: The bytes, or the path of a file to read.
        media_type: The media type; guessed from the path's suffix when not given.
        name: The file name to show; the path's name by default.

    Raises:
        InvalidContentError: The media type is missing and cannot be guessed, or the content
            does not match it.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if media_type is None:
            media_type = mimetypes.guess_type(path.name)[0]
        name = name if name is not None else path.name
        data = path.read_bytes()
    else:
        data = bytes(source)
    if not media_type:
        raise InvalidContentError(
            f"cannot tell the media type of {name or 'the bytes'}; pass media_type='...'"
        )
    try:
        return part_class(media_type)(data=data, media_type=media_type, name=name)
    except ValidationError as exc:
        raise InvalidContentError(_first_problem(exc)) from None


def part_class(media_type: str) -> type[ImagePart | AudioPart | DocumentPart]:
    """The class of part for ``media_type``: image, audio, or else a document."""
    major = media_type.partition("/")[0]
    return ImagePart if major == "image" else AudioPart if major == "audio" else DocumentPart


def _first_problem(exc: Any) -> str:
    errors = exc.errors(include_url=False)
    message = str(errors[0].get("msg", exc)) if errors else str(exc)
    return message.removeprefix("Value error, ")


def coerce_content(content: Any, what: str = "content") -> Content:
    """A message's content from what a caller gave: a string, one part, or a sequence of them.

    Strings inside a sequence become `TextPart`s; a sequence of parts becomes a tuple.

    Raises:
        InvalidContentError: ``content`` is none of those, or is an empty sequence.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, _PART_CLASSES):
        return (content,)
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        parts: list[Any] = []
        for item in content:
            if isinstance(item, str):
                parts.append(TextPart(text=item))
            elif isinstance(item, _PART_CLASSES):
                parts.append(item)
            elif isinstance(item, Mapping):  # a part's JSON form, as a log holds it
                parts.append(_part_of_json(item))
            else:
                raise InvalidContentError(
                    f"{what} holds a {type(item).__name__}; a part is a str, TextPart, "
                    "ImagePart, AudioPart or DocumentPart (file_part(path) makes one)"
                )
        if not parts:
            raise InvalidContentError(f"{what} is an empty sequence; give text or parts")
        return tuple(parts)
    raise InvalidContentError(
        f"{what} must be a str or a sequence of parts, got {type(content).__name__}"
    )


_PART_ADAPTER: TypeAdapter[Part] = TypeAdapter(Part)


def _part_of_json(item: Mapping[str, Any]) -> Part:
    try:
        return _PART_ADAPTER.validate_python(item)
    except ValidationError as exc:
        raise InvalidContentError(f"a part is not valid: {_first_problem(exc)}") from None


def content_json(content: Content) -> str | list[dict[str, Any]]:
    """``content`` as plain JSON, the form logs and peer messages carry: a str, or part dicts."""
    if isinstance(content, str):
        return content
    return [part.model_dump(mode="json") for part in content]


def content_size(content: Content) -> int:
    """The size of ``content`` in characters of text, a binary part counted as its tokens' worth."""
    if isinstance(content, str):
        return len(content)
    return sum(
        len(part.text) if isinstance(part, TextPart) else part.tokens * _CHARS_PER_TOKEN
        for part in content
    )


def content_text(content: Content) -> str:
    """The text of ``content``: itself, or its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, TextPart))


def describe_content(content: object, sep: str = "\n") -> str:
    """Content as text for people and summaries: each binary part as a short placeholder.

    Takes a message's content (a str or parts) or the same as a log holds it (a str, or a
    list of parts' JSON), and never fails: anything else is shown as ``str(content)``.

    Example:
        >>> describe_content(["look", ImagePart(url="https://x.test/a.png")], sep=" ")
        'look [image, https://x.test/a.png]'
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list | tuple):
        return str(content)
    out = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, BinaryPart):
            out.append(describe_part(part))
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if kind == "text":
                out.append(str(part.get("text", "")))
            elif (cls := _CLASS_OF.get(str(kind))) is not None:
                # Built unchecked: a label is wanted even of a part a log holds damaged.
                fields = {k: v for k, v in part.items() if k in cls.model_fields}
                out.append(describe_part(cls.model_construct(**fields)))
    return sep.join(out)


def describe_part(part: BinaryPart) -> str:
    """``[image image/png, 12.3 kB, name.png]``: a binary part as a placeholder."""
    bits = [f"{part.type} {part.media_type or ''}".rstrip()]
    if part.url is not None:
        bits.append(part.url)
    elif isinstance(part.data, str):
        bits.append(_size(part.size))
    if part.name:
        bits.append(part.name)
    return "[" + ", ".join(bits) + "]"


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} kB"
    return f"{n / 1_000_000:.1f} MB"
