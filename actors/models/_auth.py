"""API keys: where they come from, and how they reach a request without showing anywhere else."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator

import httpx

from actors.exceptions import ModelAuthenticationError

__all__ = ["ApiKey", "ApiKeySource", "HeaderAuth", "KeyResolver", "display_url"]

_CUT = "…"  # how `excerpt` marks text it cut short

ApiKeySource = str | Callable[[], str | None] | None
"""An API key, a function returning one (read on every request), or None for the environment."""


class ApiKey:
    """Holds a key; its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself, to put into a request header and nowhere else."""
        return self._value

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the key masked (servers sometimes echo it).

        The start of a key cut short where a text was cut (marked ``…``) is masked too: text
        is masked before it is cut, but a provider's parser may have cut a message it did not
        know held the key.

        Example:
            >>> key = ApiKey("sk-abcdef123456")
            >>> key.redact("bad key sk-abcdef123456 given")
            'bad key *** given'
            >>> key.redact("bad key sk-abcd…")
            'bad key ***…'
        """
        if not self._value:
            return text
        text = text.replace(self._value, "***")
        if _CUT in text:
            text = _CUT.join(self._mask_tail(part) for part in text.split(_CUT))
        return text

    def _mask_tail(self, part: str) -> str:
        """``part`` with the longest start of the key it ends with masked."""
        key = self._value
        for size in range(min(len(key) - 1, len(part)), 0, -1):
            if part.endswith(key[:size]):
                return part[:-size] + "***"
        return part

    def __repr__(self) -> str:
        return "ApiKey('***')"

    __str__ = __repr__

    def __reduce__(self) -> tuple[object, ...]:
        # A key never travels inside pickled data; the receiving side reads its own.
        raise TypeError("an API key cannot be pickled")


class KeyResolver:
    """Finds a model's key at request time, so a model without one can be built and passed around.

    Order: the explicit key (or the function giving it), then ``env_var`` when there is one.
    A key is required when ``env_var`` is set; without ``env_var`` (a server the user named by
    ``base_url``) a missing key means no auth header is sent.
    """

    __slots__ = ("_env_var", "_explicit", "_provider")

    def __init__(self, explicit: ApiKeySource, env_var: str | None, provider: str) -> None:
        self._explicit = explicit
        self._env_var = env_var
        self._provider = provider

    @property
    def has_explicit_string(self) -> bool:
        """Whether the key was given as a plain string (which must not be pickled)."""
        return isinstance(self._explicit, str)

    def without_explicit_string(self) -> KeyResolver:
        """A copy that forgets a plain-string key (for pickling); functions are kept."""
        explicit = None if isinstance(self._explicit, str) else self._explicit
        return KeyResolver(explicit, self._env_var, self._provider)

    def resolve(self) -> ApiKey | None:
        """The key for one request, or None when the server needs none.

        Raises:
            ModelAuthenticationError: A key is required and none is set.
        """
        value = self._explicit() if callable(self._explicit) else self._explicit
        if not value and self._env_var is not None:
            value = os.environ.get(self._env_var, "").strip() or None
        if value:
            return ApiKey(value)
        if self._env_var is None:
            return None
        raise ModelAuthenticationError(
            f"no API key for {self._provider}: set the {self._env_var} environment variable "
            "or pass api_key= to the model",
            status_code=401,
        )

    def __repr__(self) -> str:
        source = "explicit" if self._explicit is not None else f"env {self._env_var}"
        return f"KeyResolver({source})"


class HeaderAuth(httpx.Auth):
    """Puts a key into one request header at send time (the key lives nowhere else)."""

    def __init__(self, header: str, key: ApiKey, prefix: str = "") -> None:
        self._header = header
        self._key = key
        self._prefix = prefix

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Set the header and send the request once."""
        request.headers[self._header] = self._prefix + self._key.reveal()
        yield request

    def __repr__(self) -> str:
        return f"HeaderAuth({self._header!r}, ***)"


def display_url(url: str) -> str:
    """``url`` as reprs show it: a password and the query's values masked.

    A base URL sometimes carries a credential (``https://user:token@host``, ``?key=...``).
    """
    try:
        parsed = httpx.URL(url)
        if parsed.password:
            parsed = parsed.copy_with(userinfo=f"{parsed.username}:***".encode())
        if parsed.query:
            masked = b"&".join(name.encode() + b"=***" for name in parsed.params)
            parsed = parsed.copy_with(query=masked)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "<a URL that cannot be parsed>"
    return str(parsed)
