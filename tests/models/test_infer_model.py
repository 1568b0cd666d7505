"""infer_model, the public face of actors.models, reprs and pickling."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator

import httpx
import pytest

import actors.models
from actors import Agent
from actors.context._messages import UserMessage
from actors.exceptions import ModelAuthenticationError, UserError
from actors.models import (
    KNOWN_PROVIDERS,
    AnthropicModel,
    OpenAIChatModel,
    infer_model,
)
from actors.models._model import Model, ModelRequest


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OLLAMA_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)


def test_all_is_sorted_and_complete() -> None:
    names = actors.models.__all__
    assert names == sorted(names, key=str.lower)
    for name in names:  # the providers load on first use
        assert getattr(actors.models, name) is not None
    namespace: dict[str, object] = {}
    exec("from actors.models import *", namespace)
    assert {n for n in namespace if not n.startswith("__")} == set(names)


def test_openai() -> None:
    model = infer_model("openai:gpt-4o-mini")
    assert isinstance(model, OpenAIChatModel)
    assert isinstance(model, Model)
    assert model.name == "openai:gpt-4o-mini"
    assert model.model_name == "gpt-4o-mini"
    assert model.base_url == "https://api.openai.com/v1"


def test_openai_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.example/v1/")
    assert infer_model("openai:gpt-4o").base_url == "https://gateway.example/v1"  # type: ignore[attr-defined]


def test_anthropic() -> None:
    model = infer_model("anthropic:claude-sonnet-4-5")
    assert isinstance(model, AnthropicModel)
    assert model.name == "anthropic:claude-sonnet-4-5"
    assert model.base_url == "https://api.anthropic.com"


def test_ollama(monkeypatch: pytest.MonkeyPatch) -> None:
    model = infer_model("ollama:llama3.2")
    assert isinstance(model, OpenAIChatModel)
    assert model.name == "ollama:llama3.2"
    assert model.base_url == "http://localhost:11434/v1"
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://gpu:11434/v1")
    assert infer_model("ollama:llama3.2").base_url == "http://gpu:11434/v1"  # type: ignore[attr-defined]


def test_openai_compatible_with_url_in_the_spec_or_as_argument() -> None:
    model = infer_model("openai-compatible:Qwen/Qwen2.5-7B@http://localhost:8000/v1")
    assert isinstance(model, OpenAIChatModel)
    assert model.model_name == "Qwen/Qwen2.5-7B"
    assert model.base_url == "http://localhost:8000/v1"
    model = infer_model("openai-compatible:phi@4", base_url="http://127.0.0.1:1234/v1")
    assert model.model_name == "phi@4"  # type: ignore[attr-defined]
    assert model.base_url == "http://127.0.0.1:1234/v1"  # type: ignore[attr-defined]


def test_spaces_and_case_of_the_provider_are_forgiven() -> None:
    assert infer_model("  OpenAI:gpt-4o ").name == "openai:gpt-4o"


def test_a_model_passes_through() -> None:
    model = OpenAIChatModel("x")
    assert infer_model(model) is model


@pytest.mark.parametrize("spec", ["gpt-4o", "mistral:large", ":gpt-4o", "openai:", "openai: "])
def test_bad_specs_are_caller_mistakes(spec: str) -> None:
    with pytest.raises(UserError) as caught:
        infer_model(spec)
    if ":" not in spec or spec.startswith(("mistral", ":")):
        for provider in KNOWN_PROVIDERS:
            assert repr(provider) in str(caught.value)


def test_openai_compatible_needs_a_server() -> None:
    with pytest.raises(UserError, match="base_url"):
        infer_model("openai-compatible:qwen")


def test_not_a_model_at_all() -> None:
    with pytest.raises(UserError):
        infer_model(42)  # type: ignore[arg-type]


def test_building_without_a_key_works_and_asking_says_what_to_set() -> None:
    model = infer_model("openai:gpt-4o-mini")  # no OPENAI_API_KEY: still fine

    async def ask() -> None:
        async with model:  # type: ignore[attr-defined]
            await model.request(ModelRequest(messages=[UserMessage(content="hi")]))

    with pytest.raises(ModelAuthenticationError, match="OPENAI_API_KEY"):
        asyncio.run(ask())


def test_repr_shows_model_and_server_but_never_the_key() -> None:
    model = OpenAIChatModel("gpt-4o-mini", api_key="sk-secret-123")
    assert repr(model) == "OpenAIChatModel('gpt-4o-mini', base_url='https://api.openai.com/v1')"
    anthropic = AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-secret")
    assert "secret" not in repr(anthropic)
    assert "secret" not in repr(vars(model)) + repr(vars(anthropic))


def _key_from_vault() -> str:
    return "sk-from-vault"


def test_pickling_drops_a_plain_key_but_keeps_a_key_function() -> None:
    plain = OpenAIChatModel("gpt-4o-mini", api_key="sk-secret-123")
    data = pickle.dumps(plain)
    assert b"sk-secret-123" not in data
    copy = pickle.loads(data)
    assert copy.name == plain.name
    with pytest.raises(ModelAuthenticationError, match="OPENAI_API_KEY"):
        copy._keys.resolve()

    with_function = pickle.loads(pickle.dumps(OpenAIChatModel("m", api_key=_key_from_vault)))
    key = with_function._keys.resolve()
    assert key is not None
    assert key.reveal() == "sk-from-vault"


def test_a_model_with_a_user_client_refuses_to_pickle() -> None:
    async def main() -> None:
        async with httpx.AsyncClient() as client:
            with pytest.raises(TypeError, match="http_client"):
                pickle.dumps(OpenAIChatModel("m", http_client=client))

    asyncio.run(main())


# -- the provider registry --------------------------------------------------------------------


@pytest.fixture
def registry() -> Iterator[None]:
    from actors.models import _infer

    saved = dict(_infer._registry)
    yield
    _infer._registry.clear()
    _infer._registry.update(saved)


def test_a_registered_provider_makes_models_from_strings(registry: None) -> None:
    from actors.models import providers, register_provider

    seen: list[tuple[str, str | None, object]] = []

    def gateway(name: str, base_url: str | None, api_key: object) -> OpenAIChatModel:
        seen.append((name, base_url, api_key))
        url = base_url or "http://gateway.internal/v1"
        return OpenAIChatModel(name, base_url=url, provider="gateway")

    register_provider("gateway", gateway)
    assert "gateway" in providers()
    model = infer_model("gateway:large")
    assert (model.name, seen) == ("gateway:large", [("large", None, None)])
    infer_model("gateway:small", base_url="http://other/v1", api_key="k")
    assert seen[-1] == ("small", "http://other/v1", "k")
    # an agent takes it by name, as a built-in one
    assert Agent("a", model="gateway:large").model is not None


def test_registering_a_taken_or_bad_name_is_refused(registry: None) -> None:
    from actors.models import register_provider

    def factory(name: str, base_url: str | None, api_key: object) -> OpenAIChatModel:
        return OpenAIChatModel(name, base_url="http://x/v1")

    with pytest.raises(UserError, match="registered already; pass replace=True"):
        register_provider("openai", factory)
    for bad in ("", "Upper", "test", "a:b", 3):
        with pytest.raises(UserError, match="provider's name"):
            register_provider(bad, factory)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="callable factory"):
        register_provider("mine", "not a function")  # type: ignore[arg-type]
    register_provider("openai", factory, replace=True)
    assert infer_model("openai:gpt").name == "openai:gpt"


def test_a_factory_that_returns_no_model_is_named(registry: None) -> None:
    from actors.models import register_provider

    register_provider("broken", lambda name, base_url, api_key: "nope")  # type: ignore[arg-type,return-value]
    with pytest.raises(UserError, match="factory of provider 'broken' returned str, not a Model"):
        infer_model("broken:x")
