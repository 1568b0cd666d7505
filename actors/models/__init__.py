"""Model providers over HTTP: OpenAI Chat Completions (and compatible servers), Anthropic.

Every model here speaks the `actors.models._model.Model` protocol: ``await model.request(request)``
returns one complete `ModelResponse`, streaming pieces to ``request.on_delta`` on the way.
Models that talk to one server share its connections (`HTTPPool`: small httpx clients behind
one queue, per asyncio loop; the runtime sends all model requests from one loop thread),
and requests are retried by a `RetryPolicy` on rate limits,
server errors, dropped connections and timeouts. Failures come out as the typed errors of
`actors.exceptions` (`ModelHTTPError`, `ModelAuthenticationError`, `ModelTimeoutError`,
`UnexpectedModelResponse`), and a cancelled run closes its request in flight.

Example:
    >>> from actors.models import infer_model
    >>> infer_model("anthropic:claude-sonnet-4-5").name
    'anthropic:claude-sonnet-4-5'

The `Model` protocol itself (`actors.models._model`) and the test models live here too; the
providers are imported on first use, so ``import actors`` never pays for httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.models._accepts import ANTHROPIC_ACCEPTS, OPENAI_ACCEPTS, Accepts
    from actors.models._anthropic import AnthropicModel, CacheBreakpoints
    from actors.models._arguments import INVALID_ARGUMENTS_KEY
    from actors.models._auth import ApiKey, HeaderAuth, KeyResolver
    from actors.models._base import HTTPModel, StreamAssembler
    from actors.models._cache_key import request_key
    from actors.models._cached import CachedModel
    from actors.models._fallback import FallbackModel, is_provider_failure
    from actors.models._infer import (
        KNOWN_PROVIDERS,
        ProviderFactory,
        infer_model,
        providers,
        register_provider,
    )
    from actors.models._openai import OpenAIChatModel
    from actors.models._pool import HTTPPool
    from actors.models._retry import RetryPolicy
    from actors.models._sse import ServerSentEvent
    from actors.models._tokens import (
        TokenCalibration,
        context_window_of,
        count_tokens,
        estimate_tokens,
    )

__all__ = [
    "Accepts",
    "ANTHROPIC_ACCEPTS",
    "AnthropicModel",
    "ApiKey",
    "CacheBreakpoints",
    "CachedModel",
    "context_window_of",
    "count_tokens",
    "estimate_tokens",
    "FallbackModel",
    "HeaderAuth",
    "HTTPModel",
    "HTTPPool",
    "infer_model",
    "INVALID_ARGUMENTS_KEY",
    "is_provider_failure",
    "KeyResolver",
    "KNOWN_PROVIDERS",
    "OPENAI_ACCEPTS",
    "OpenAIChatModel",
    "ProviderFactory",
    "providers",
    "register_provider",
    "request_key",
    "RetryPolicy",
    "ServerSentEvent",
    "StreamAssembler",
    "TokenCalibration",
]

_HOMES = {
    "Accepts": "_accepts",
    "ANTHROPIC_ACCEPTS": "_accepts",
    "OPENAI_ACCEPTS": "_accepts",
    "CacheBreakpoints": "_anthropic",
    "ApiKey": "_auth",
    "HeaderAuth": "_auth",
    "HTTPModel": "_base",
    "KeyResolver": "_auth",
    "ServerSentEvent": "_sse",
    "StreamAssembler": "_base",
    "AnthropicModel": "_anthropic",
    "FallbackModel": "_fallback",
    "HTTPPool": "_pool",
    "CachedModel": "_cached",
    "INVALID_ARGUMENTS_KEY": "_arguments",
    "is_provider_failure": "_fallback",
    "KNOWN_PROVIDERS": "_infer",
    "infer_model": "_infer",
    "OpenAIChatModel": "_openai",
    "ProviderFactory": "_infer",
    "providers": "_infer",
    "register_provider": "_infer",
    "RetryPolicy": "_retry",
    "request_key": "_cache_key",
    "TokenCalibration": "_tokens",
    "context_window_of": "_tokens",
    "count_tokens": "_tokens",
    "estimate_tokens": "_tokens",
}


def __getattr__(name: str) -> Any:
    # The providers import httpx; the Model protocol beside them must not.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'actors.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"actors.models.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
