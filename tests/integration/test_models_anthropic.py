"""The Anthropic adapter, driven through the real ``anthropic`` SDK against a replay server."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from replay.server import ReplayServer, Reply, fixture

from interlock.errors import DeadlineExceededError, ResourceExhaustedError, UnauthenticatedError, UnavailableError
from interlock.messages import Message
from interlock.models import ModelChunk, ModelRequest, ToolDefinition
from interlock.models.anthropic import AnthropicModel
from interlock.parts import MediaPart, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"


@pytest.fixture(scope="module")
def running() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
def server(running: ReplayServer) -> ReplayServer:
    running.reset()
    return running


@pytest.fixture
async def model(server: ReplayServer) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel("claude-sonnet-4-6", base_url=server.url, api_key="sk-ant-test", retry_delay=0.001) as m:
        yield m


async def test_text_without_streaming(server: ReplayServer, model: AnthropicModel) -> None:
    server.json(fixture("anthropic/messages_text.json"))
    request = ModelRequest(
        messages=[Message.system("Be brief."), Message.user("Hi")],
        config={"temperature": 0.2, "maxOutputTokens": 64, "topP": 0.9, "topK": 40, "stopSequences": ["END"]},
    )

    response = await model.generate(request)

    assert response.message == Message.model("Hello! How can I help you today?")
    assert response.finish_reason == "stop"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (12, 10, 22)
    [sent] = server.received
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert "sk-ant-test" in (
        sent.headers.get("x-api-key"),
        sent.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert "anthropic-version" in sent.headers
    assert sent.json() == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "stop_sequences": ["END"],
    }


async def test_max_tokens_is_length(server: ReplayServer, model: AnthropicModel) -> None:
    server.json(fixture("anthropic/messages_max_tokens.json"))
    response = await model.generate(ModelRequest(messages=[Message.user("Tell a story")]))
    assert (response.message.text, response.finish_reason) == ("Once upon a", "length")
    assert server.received[0].json()["max_tokens"] == 4096


async def test_streamed_text_reaches_on_chunk_in_order(server: ReplayServer, model: AnthropicModel) -> None:
    server.sse(fixture("anthropic/messages_text_stream.sse"))
    chunks: list[ModelChunk] = []

    response = await model.generate(ModelRequest(messages=[Message.user("Hi")]), on_chunk=chunks.append)

    assert [c.text for c in chunks] == ["Hel", "lo", " there", "!"]
    assert response.message == Message.model("Hello there!")
    assert response.finish_reason == "stop"
    assert response.usage is not None and (response.usage.input_tokens, response.usage.output_tokens) == (12, 6)
    assert server.received[0].json()["stream"] is True


async def test_streamed_thinking_and_tool_input_deltas(server: ReplayServer, model: AnthropicModel) -> None:
    server.sse(fixture("anthropic/messages_tool_use_stream.sse"))
    chunks: list[ModelChunk] = []

    response = await model.generate(
        ModelRequest(messages=[Message.user("Weather in Paris?")], tools=[WEATHER]), on_chunk=chunks.append
    )

    assert [c.content for c in chunks] == [
        [ReasoningPart(reasoning="The user wants the weather")],
        [ReasoningPart(reasoning=" in Paris.")],
        [TextPart(text="Let me check")],
        [TextPart(text=".")],
    ]
    assert response.message.content == [
        ReasoningPart(reasoning="The user wants the weather in Paris.", custom={"signature": SIGNATURE}),
        TextPart(text="Let me check."),
        ToolRequestPart(
            name="get_weather", ref="toolu_01T1x1fJ34qAmk2tNTrN7Up6", input={"city": "Paris", "unit": "celsius"}
        ),
    ]
    assert response.finish_reason == "stop"


async def test_tool_call_round_trip(server: ReplayServer, model: AnthropicModel) -> None:
    server.json(fixture("anthropic/messages_tool_use.json"))
    server.json(fixture("anthropic/messages_after_tool.json"))
    history = [Message.user("Weather in Paris?")]

    first = await model.generate(ModelRequest(messages=history, tools=[WEATHER], tool_choice="required"))

    call = ToolRequestPart(
        name="get_weather", ref="toolu_01A09q90qw90lq917835lq9", input={"city": "Paris", "unit": "celsius"}
    )
    assert first.message.tool_requests == [call]
    assert first.message.reasoning.startswith("The user wants the weather")
    sent = server.received[0].json()
    assert sent["tools"] == [
        {"name": "get_weather", "input_schema": WEATHER.input_schema, "description": "Current weather for a city."}
    ]
    assert sent["tool_choice"] == {"type": "any"}

    answer = ToolResponsePart(name="get_weather", ref="toolu_01A09q90qw90lq917835lq9", output={"temp": 18})
    history += [first.message, Message(role="tool", content=[answer])]
    second = await model.generate(ModelRequest(messages=history, tools=[WEATHER]))

    assert second.message.text == "It is 18°C and sunny in Paris."
    messages = server.received[1].json()["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "The user wants the weather in Paris; I should call get_weather.",
                "signature": SIGNATURE,
            },
            {"type": "text", "text": "I'll check the weather in Paris."},
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "get_weather",
                "input": {"city": "Paris", "unit": "celsius"},
            },
        ],
    }
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": json.dumps({"temp": 18})}
        ],
    }


async def test_media_goes_out_as_base64_and_url_images(server: ReplayServer, model: AnthropicModel) -> None:
    server.json(fixture("anthropic/messages_text.json"))
    message = Message(
        role="user",
        content=[
            TextPart(text="Compare these."),
            MediaPart(url="data:image/png;base64,iVBORw0KGgo="),
            MediaPart(url="https://example.com/cat.jpg", content_type="image/jpeg"),
        ],
    )

    await model.generate(ModelRequest(messages=[message]))

    assert server.received[0].json()["messages"][0]["content"] == [
        {"type": "text", "text": "Compare these."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]


async def test_401_is_unauthenticated(server: ReplayServer, model: AnthropicModel) -> None:
    server.json(fixture("anthropic/error_401.json"), status=401)
    with pytest.raises(UnauthenticatedError, match="invalid x-api-key"):
        await model.generate(ModelRequest(messages=[Message.user("Hi")]))
    assert len(server.received) == 1


async def test_429_is_retried_then_succeeds(server: ReplayServer, model: AnthropicModel) -> None:
    server.json(fixture("anthropic/error_429.json"), status=429)
    server.json(fixture("anthropic/error_429.json"), status=429)
    server.json(fixture("anthropic/messages_text.json"))

    response = await model.generate(ModelRequest(messages=[Message.user("Hi")]))

    assert response.message.text == "Hello! How can I help you today?"
    assert len(server.received) == 3


async def test_429_every_time_is_resource_exhausted(server: ReplayServer, model: AnthropicModel) -> None:
    for _ in range(3):
        server.json(fixture("anthropic/error_429.json"), status=429)
    with pytest.raises(ResourceExhaustedError, match="exceed the rate limit"):
        await model.generate(ModelRequest(messages=[Message.user("Hi")]), on_chunk=lambda chunk: None)
    assert len(server.received) == 3


async def test_overloaded_error_event_mid_stream_is_unavailable(server: ReplayServer) -> None:
    server.sse(fixture("anthropic/messages_overloaded_stream.sse"))
    async with AnthropicModel("claude-sonnet-4-6", base_url=server.url, api_key="k", max_retries=0) as model:
        with pytest.raises(UnavailableError, match="Overloaded"):
            await model.generate(ModelRequest(messages=[Message.user("Hi")]), on_chunk=lambda chunk: None)


async def test_529_is_retried(server: ReplayServer, model: AnthropicModel) -> None:
    server.json(fixture("anthropic/error_529.json"), status=529)
    server.json(fixture("anthropic/messages_text.json"))
    response = await model.generate(ModelRequest(messages=[Message.user("Hi")]))
    assert response.finish_reason == "stop"
    assert len(server.received) == 2


async def test_timeout_is_deadline_exceeded(server: ReplayServer) -> None:
    server.replies.append(Reply(body=fixture("anthropic/messages_text.json"), delay=0.5))
    async with AnthropicModel("claude-sonnet-4-6", base_url=server.url, api_key="k", timeout=0.1) as model:
        with pytest.raises(DeadlineExceededError):
            await model.generate(ModelRequest(messages=[Message.user("Hi")]))


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.delitem(sys.modules, "interlock.models.anthropic")
    with pytest.raises(ImportError, match=r"pip install 'interlock\[anthropic\]'"):
        importlib.import_module("interlock.models.anthropic")
