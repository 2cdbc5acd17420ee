"""The provider registry: ``provider/model`` names resolved to models."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replay.server import ReplayServer, fixture

from interlock.errors import InvalidArgumentError
from interlock.messages import Message
from interlock.models import Model, ModelRequest
from interlock.models import _registry as registry  # pyright: ignore[reportPrivateUsage]
from interlock.models._registry import providers, register_provider, resolve_model
from interlock.models.anthropic import AnthropicModel
from interlock.models.gemini import GeminiModel
from interlock.models.openai import OpenAIModel
from interlock.testing import ScriptedModel


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    registered = registry._registered  # pyright: ignore[reportPrivateUsage]
    saved = dict(registered)
    yield
    registered.clear()
    registered.update(saved)


async def test_openai_name_resolves_and_answers() -> None:
    with ReplayServer() as server:
        server.json(fixture("openai/chat_text.json"))
        model = resolve_model("openai/gpt-4o-mini", base_url=f"{server.url}/v1", api_key="sk-test")
        assert isinstance(model, OpenAIModel)
        async with model:
            response = await model.generate(ModelRequest(messages=[Message.user("Hi")]))
    assert model.name == "openai/gpt-4o-mini"
    assert response.message.text == "Hello! How can I help you today?"
    assert server.received[0].json()["model"] == "gpt-4o-mini"


async def test_builtin_providers_build_their_adapters() -> None:
    anthropic = resolve_model("anthropic/claude-sonnet-4-6", api_key="k")
    gemini = resolve_model("gemini/gemini-2.5-flash", api_key="k")
    googleai = resolve_model("googleai/gemini-2.5-flash", api_key="k")
    ollama = resolve_model("ollama/llama3.2")
    try:
        assert isinstance(anthropic, AnthropicModel)
        assert isinstance(gemini, GeminiModel) and isinstance(googleai, GeminiModel)
        assert isinstance(ollama, OpenAIModel)
        assert [m.name for m in (anthropic, gemini, googleai, ollama)] == [
            "anthropic/claude-sonnet-4-6",
            "gemini/gemini-2.5-flash",
            "googleai/gemini-2.5-flash",
            "ollama/llama3.2",
        ]
        assert str(ollama.client.base_url) == "http://127.0.0.1:11434/v1/"
    finally:
        for model in (anthropic, gemini, googleai, ollama):
            assert isinstance(model, AnthropicModel | GeminiModel | OpenAIModel)
            await model.aclose()


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown model provider 'nope'") as caught:
        resolve_model("nope/some-model")
    assert "known providers: anthropic, gemini, googleai, ollama, openai, openai-compatible" in str(caught.value)
    assert caught.value.status == "INVALID_ARGUMENT"


@pytest.mark.parametrize("name", ["gpt-4o-mini", "/gpt-4o-mini", "openai/"])
def test_name_without_provider_is_invalid(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="provider/model"):
        resolve_model(name)


def test_openai_compatible_needs_a_base_url() -> None:
    with pytest.raises(InvalidArgumentError, match="base_url"):
        resolve_model("openai-compatible/qwen2.5")


async def test_registered_provider_wins() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def scripted(model_id: str, **options: Any) -> Model:
        seen.append((model_id, options))
        return ScriptedModel(["hi"], name=f"openai/{model_id}")

    register_provider("openai", scripted)
    model = resolve_model("openai/gpt-4o-mini", temperature=0)

    assert seen == [("gpt-4o-mini", {"temperature": 0})]
    assert (await model.generate(ModelRequest(messages=[Message.user("x")]))).message.text == "hi"


def test_register_rejects_a_prefix_with_a_slash() -> None:
    with pytest.raises(InvalidArgumentError):
        register_provider("a/b", ScriptedModel)


def test_entry_points_add_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "echo_provider.py").write_text(
        textwrap.dedent(
            """
            from interlock.testing import EchoModel

            def echo(model_id, **options):
                return EchoModel()
            """
        )
    )
    dist = tmp_path / "echo_provider-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-provider\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[interlock.models]\necho = echo_provider:echo\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # pyright: ignore[reportUnknownMemberType]
    monkeypatch.delitem(sys.modules, "echo_provider", raising=False)

    assert "echo" in providers()
    assert type(resolve_model("echo/anything")).__name__ == "EchoModel"


def test_missing_sdk_is_reported_when_resolving(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.delitem(sys.modules, "interlock.models.anthropic")
    with pytest.raises(ImportError, match=r"pip install 'interlock\[anthropic\]'"):
        resolve_model("anthropic/claude-sonnet-4-6", api_key="k")
