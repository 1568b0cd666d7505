"""Model specs as strings (``"openai:gpt-4o-mini"``) turned into models."""

from __future__ import annotations

import os
import re

from actors.exceptions import UserError
from actors.models._anthropic import AnthropicModel
from actors.models._auth import ApiKeySource
from actors.models._model import Model
from actors.models._openai import OpenAIChatModel
from actors.models._test_model import TestModel

__all__ = ["KNOWN_PROVIDERS", "infer_model"]

OLLAMA_BASE_URL = "http://localhost:11434/v1"
KNOWN_PROVIDERS = ("anthropic", "ollama", "openai", "openai-compatible")

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
        UserError: The provider is not one of `KNOWN_PROVIDERS`, or the spec is malformed.

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
    known = ", ".join(repr(p) for p in KNOWN_PROVIDERS)
    if not colon or provider not in KNOWN_PROVIDERS:
        raise UserError(
            f"cannot tell the provider of model {spec!r}: write 'provider:model', "
            f"with provider one of {known} (or 'test' for a TestModel)"
        )
    if provider == "openai-compatible" and base_url is None:
        match = _AT_URL.match(name)
        if match is None:
            raise UserError(
                f"{spec!r} needs a server: write 'openai-compatible:<model>@<base_url>' "
                "or pass base_url="
            )
        name, base_url = match["model"], match["url"]
    if not name:
        raise UserError(f"model spec {spec!r} names no model after {provider!r}")
    if provider == "anthropic":
        return AnthropicModel(name, base_url=base_url, api_key=api_key)
    if provider == "ollama" and base_url is None:
        base_url = os.environ.get("OLLAMA_BASE_URL", "").strip() or OLLAMA_BASE_URL
    return OpenAIChatModel(name, base_url=base_url, api_key=api_key, provider=provider)
