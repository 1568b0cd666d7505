"""`Accepts`: what content a model takes, checked before a request is sent.

A model that is sent a part it cannot read fails on the provider's side, after the upload, and
fails again on every later request of the session, since the part stays in the transcript. So
each HTTP model says what it takes (its class's default, or the ``accepts=`` it was given), and
a request holding anything else is refused with `UnsupportedContentError` before a byte goes
out, naming the part, its media type and what the model does take.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from actors.context._messages import Message
from actors.context._parts import BINARY_KINDS, BinaryPart, describe_part
from actors.exceptions import UnsupportedContentError, UserError

__all__ = ["ANTHROPIC_ACCEPTS", "EVERYTHING", "OPENAI_ACCEPTS", "Accepts"]

MB: Final = 1024 * 1024


@dataclass(frozen=True)
class Accepts:
    """What content a model takes: media types, parts given by URL, and size limits.

    Attributes:
        media_types: The media types of the parts the model reads: exact (``"image/png"``),
            a whole major type (``"image/*"``) or anything (``"*/*"``). A part given by URL
            without a media type is checked by its kind only.
        urls: The kinds of part (``"image"``, ``"audio"``, ``"document"``) the model may be
            given by URL (the provider fetches them); others must be given as bytes.
        max_bytes: The largest part of each kind, in bytes of content (not of base64); a kind
            not named has no limit here.
        max_request_bytes: The largest request body, in bytes of JSON as sent (base64
            included), or None for no limit here.

    Example:
        >>> from actors import AudioPart
        >>> wav = AudioPart(data=b"RIFF....WAVE", media_type="audio/wav")
        >>> Accepts(media_types=("image/*",)).refusal(wav)
        'audio/wav content'
    """

    media_types: tuple[str, ...] = ("*/*",)
    urls: frozenset[str] = BINARY_KINDS
    max_bytes: Mapping[str, int] = field(default_factory=dict)
    max_request_bytes: int | None = None

    def __post_init__(self) -> None:
        # Given as lists or sets, kept as the frozen types; a copy of max_bytes, so that the
        # caller's dict changing later changes nothing here.
        if isinstance(self.media_types, str) or not all(
            isinstance(m, str) for m in self.media_types
        ):
            raise UserError(f"media_types must be a sequence of str, got {self.media_types!r}")
        unknown = set(self.urls) - BINARY_KINDS
        if unknown:
            raise UserError(f"urls names kinds that are not {sorted(BINARY_KINDS)}: {unknown}")
        object.__setattr__(self, "media_types", tuple(m.lower() for m in self.media_types))
        object.__setattr__(self, "urls", frozenset(self.urls))
        object.__setattr__(self, "max_bytes", dict(self.max_bytes))

    def takes_media_type(self, media_type: str) -> bool:
        """Whether the model reads parts of ``media_type``."""
        major = media_type.partition("/")[0]
        return any(pattern in ("*/*", media_type, f"{major}/*") for pattern in self.media_types)

    def refusal(self, part: BinaryPart) -> str | None:
        """What about ``part`` the model does not take (for a message), or None if it takes it."""
        if part.url is not None:
            if part.type not in self.urls:
                return f"{part.type} given by URL"
            if part.media_type and not self.takes_media_type(part.media_type):
                return f"{part.media_type} content"
            return None
        if not self.takes_media_type(part.media_type):
            return f"{part.media_type} content"
        limit = self.max_bytes.get(part.type)
        if limit is not None and part.size > limit:
            return f"a {part.type} of {_mb(part.size)} (at most {_mb(limit)} a {part.type})"
        return None

    def check(self, messages: Iterable[Message], model: str) -> int:
        """Refuse the first part of ``messages`` the model does not take.

        Returns:
            How many binary parts the messages hold (all of them taken).

        Raises:
            UnsupportedContentError: A part the model does not take, named with what it takes.
        """
        binary = 0
        for message in messages:
            content = message.content
            if type(content) is str:  # nearly every message: nothing to look at
                continue
            for part in content:
                if not isinstance(part, BinaryPart):
                    continue
                binary += 1
                why = self.refusal(part)
                if why is not None:
                    raise UnsupportedContentError(
                        f"{model} does not take {why}: {describe_part(part)} in a "
                        f"{message.role} message; it takes {self.describe()}. Nothing was sent. "
                        "Send it to a model that takes it, or convert it",
                        model,
                        describe_part(part),
                        part.media_type,
                        self.describe(),
                    )
        return binary

    def check_size(self, size: int, model: str) -> None:
        """Refuse a request body of ``size`` bytes past `max_request_bytes`.

        Raises:
            UnsupportedContentError: The body is larger than the model takes.
        """
        limit = self.max_request_bytes
        if limit is not None and size > limit:
            accepted = f"requests of at most {_mb(limit)}"
            raise UnsupportedContentError(
                f"{model} takes {accepted}, and this one is {_mb(size)} as JSON (base64 "
                "included). Nothing was sent. Send fewer or smaller parts at once",
                model,
                f"[request, {_mb(size)}]",
                "application/json",
                accepted,
            )

    def describe(self) -> str:
        """What the model takes, in words (for error messages)."""
        if self.media_types == ("*/*",):
            kinds = "any media type"
        else:
            kinds = ", ".join(self.media_types) if self.media_types else "text only"
        bits = [kinds]
        by_url = sorted(self.urls & BINARY_KINDS)
        bits.append(f"by URL: {', '.join(by_url)}" if by_url else "nothing by URL")
        bits += [f"{kind}s up to {_mb(n)}" for kind, n in sorted(self.max_bytes.items())]
        if self.max_request_bytes is not None:
            bits.append(f"requests up to {_mb(self.max_request_bytes)}")
        return "; ".join(bits)


def _mb(size: int) -> str:
    return f"{size / MB:.1f} MB"


EVERYTHING: Final = Accepts()
"""Any part, by bytes or URL, of any size: what test models and `HTTPModel` take by default."""

_IMAGES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")

OPENAI_ACCEPTS: Final = Accepts(
    media_types=(
        *_IMAGES,
        "audio/wav",
        "audio/x-wav",
        "audio/wave",
        "audio/mpeg",
        "audio/mp3",
        "application/pdf",
        "text/*",
    ),
    urls=frozenset({"image"}),
    max_bytes={"image": 20 * MB, "document": 32 * MB},
)
"""What `OpenAIChatModel` takes by default: Chat Completions' images (20 MB each, also by
URL), wav and mp3 audio, PDFs (32 MB), and text documents (sent as text)."""

ANTHROPIC_ACCEPTS: Final = Accepts(
    media_types=(*_IMAGES, "application/pdf", "text/*"),
    urls=frozenset({"image", "document"}),
    max_bytes={"image": 5 * MB},
    max_request_bytes=32 * MB,
)
"""What `AnthropicModel` takes by default: images (5 MB each), PDFs and text documents (a
PDF also by URL), no audio, requests up to 32 MB."""
