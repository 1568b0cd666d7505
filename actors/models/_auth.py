"""API keys: where they come from, and how they reach a request without showing anywhere else."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator

import httpx

from actors.exceptions import ModelAuthenticationError

__all__ = ["ApiKey", "ApiKeySource", "HeaderAuth", "KeyResolver"]

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
        """``text`` with every occurrence of the key masked (servers sometimes echo it)."""
        return text.replace(self._value, "***") if self._value else text

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
