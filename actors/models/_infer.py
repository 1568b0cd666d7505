"""Model specs as strings (``"openai:gpt-4o-mini"``) turned into models, through one registry.

Every provider, built in or not, is a name and a factory in one registry: ``infer_model``
splits ``"provider:model"`` and calls the provider's factory with the model's name, the
``base_url`` and the ``api_key``. `register_provider` adds one (a provider of your own, or a
gateway with its own defaults), so ``Agent(model="mygateway:large")`` and ``--model`` on the
command line work with it too.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable

from actors.exceptions import UserError
from actors.models._anthropic import AnthropicModel
from actors.models._auth import ApiKeySource
from actors.models._model import Model
from actors.models._openai import OpenAIChatModel
from actors.models._test_model import TestModel

__all__ = ["KNOWN_PROVIDERS", "ProviderFactory", "infer_model", "providers", "register_provider"]

OLLAMA_BASE_URL = "http://localhost:11434/v1"
KNOWN_PROVIDERS = ("anthropic", "ollama", "openai", "openai-compatible")
"""The providers built in (`providers` lists every registered one)."""

ProviderFactory = Callable[[str, "str | None", ApiKeySource], Model]
"""Makes a provider's model: ``factory(model_name, base_url, api_key)``; ``base_url`` and
``api_key`` are None unless the caller gave them (the factory picks its defaults then)."""

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def _openai(name: str, base_url: str | None, api_key: ApiKeySource) -> Model:
    return OpenAIChatModel(name, base_url=base_url, api_key=api_key)


def _anthropic(name: str, base_url: str | None, api_key: ApiKeySource) -> Model:
    return AnthropicModel(name, base_url=base_url, api_key=api_key)


def _ollama(name: str, base_url: str | None, api_key: ApiKeySource) -> Model:
    if base_url is None:
        base_url = os.environ.get("OLLAMA_BASE_URL", "").strip() or OLLAMA_BASE_URL
    return OpenAIChatModel(name, base_url=base_url, api_key=api_key, provider="ollama")


def _compatible(name: str, base_url: str | None, api_key: ApiKeySource) -> Model:
    if base_url is None:
        match = _AT_URL.match(name)
        if match is None:
            raise UserError(
                f"'openai-compatible:{name}' needs a server: write "
                "'openai-compatible:<model>@<base_url>' or pass base_url="
            )
        name, base_url = match["model"], match["url"]
    return OpenAIChatModel(name, base_url=base_url, api_key=api_key, provider="openai-compatible")


_lock = threading.Lock()
_registry: dict[str, ProviderFactory] = {
    "anthropic": _anthropic,
    "ollama": _ollama,
    "openai": _openai,
    "openai-compatible": _compatible,
}


def register_provider(name: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Make ``"<name>:<model>"`` strings mean models that ``factory`` makes.

    Args:
        name: The provider's name: lowercase letters, digits, ``.``, ``_`` and ``-``.
        factory: ``factory(model_name, base_url, api_key)`` returns the `Model`.
        replace: Allow replacing a registered provider (a built-in one too).

    Raises:
        UserError: The name is malformed or ``"test"``, the factory is not callable, or the
            name is registered already and ``replace`` is false.

    Example:
        >>> from actors.models import OpenAIChatModel, infer_model, register_provider
        >>> def gateway(name, base_url, api_key):
        ...     url = base_url or "http://gateway.internal/v1"
        ...     return OpenAIChatModel(name, base_url=url, api_key=api_key, provider="gateway")
        >>> register_provider("gateway", gateway, replace=True)
        >>> infer_model("gateway:large").name
        'gateway:large'
    """
    if not isinstance(name, str) or not _NAME.match(name) or name == "test":
        raise UserError(
            f"a provider's name is lowercase letters, digits, '.', '_' and '-' (not 'test'), "
            f"got {name!r}"
        )
    if not callable(factory):
        raise UserError(f"register_provider({name!r}, ...) needs a callable factory")
    with _lock:
        if name in _registry and not replace:
            raise UserError(
                f"provider {name!r} is registered already; pass replace=True to replace it"
            )
        _registry[name] = factory


def providers() -> tuple[str, ...]:
    """The names of every registered provider, sorted (the built-in ones and yours)."""
    with _lock:
        return tuple(sorted(_registry))


# "<model>@<url>": the model name ends at the first "@" that starts an http(s) URL.
_AT_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://.+)$")


def infer_model(
    spec: str | Model,
    *,
    base_url: str | None = None,
    api_key: ApiKeySource = None,
) -> Model:
    """Turn a ``"provider:model"`` string into a model; a model passes through unchanged.

    Providers:

    - ``"openai:<model>"``: OpenAI, or ``OPENAI_BASE_URL`` when set; key from
      ``OPENAI_API_KEY``.
    - ``"anthropic:<model>"``: Anthropic, or ``ANTHROPIC_BASE_URL`` when set; key from
      ``ANTHROPIC_API_KEY``.
    - ``"ollama:<model>"``: Ollama's OpenAI-compatible API at ``OLLAMA_BASE_URL``, by default
      ``http://localhost:11434/v1``; no key.
    - ``"openai-compatible:<model>@<base_url>"`` (or ``"openai-compatible:<model>"`` with
      ``base_url=``): any server speaking Chat Completions (vLLM, llama.cpp, LM Studio, ...);
      a key only if ``api_key`` is given.

    - ``"test"``: a `TestModel` (offline; for test suites, e.g. as ``ACTORS_DEFAULT_MODEL``).

    Keys are read when a request is sent, not here, so a spec can be turned into a model
    before the key is set.

    Args:
        spec: The string, or a model (returned as it is).
        base_url: Send requests to this server instead (any provider).
        api_key: The key, or a function returning it, instead of the environment's.

    Raises:
        UserError: No provider of that name is registered (see `providers`), or the spec is
            malformed.

    Example:
        >>> infer_model("ollama:llama3.2", base_url="http://gpu-box:11434/v1")
        OpenAIChatModel('llama3.2', base_url='http://gpu-box:11434/v1')
        >>> infer_model("openai-compatible:qwen2.5@http://localhost:8000/v1").name
        'openai-compatible:qwen2.5'
    """
    if not isinstance(spec, str):
        if isinstance(spec, Model):
            return spec
        raise UserError(f"a model must be a Model or a 'provider:model' string, got {spec!r}")
    if spec.strip() == "test":
        return TestModel()
    provider, colon, name = spec.strip().partition(":")
    provider = provider.strip().lower()
    name = name.strip()
    with _lock:
        factory = _registry.get(provider) if colon else None
        known = ", ".join(repr(p) for p in sorted(_registry))
    if factory is None:
        raise UserError(
            f"cannot tell the provider of model {spec!r}: write 'provider:model', "
            f"with provider one of {known} (or 'test' for a TestModel; register_provider "
            "adds one)"
        )
    if not name:
        raise UserError(f"model spec {spec!r} names no model after {provider!r}")
    model = factory(name, base_url, api_key)
    if not isinstance(model, Model):
        raise UserError(
            f"the factory of provider {provider!r} returned {type(model).__name__}, not a Model"
        )
    return model
