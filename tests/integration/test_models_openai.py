"""The OpenAI adapter, driven through the real ``openai`` SDK against a replay server."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from replay.server import ReplayServer, Reply, fixture

from interlock.errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    ModelError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)
from interlock.messages import Message
from interlock.models import ModelChunk, ModelRequest, ToolDefinition
from interlock.models.openai import OpenAIModel, ollama_model
from interlock.parts import MediaPart, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
)


@pytest.fixture(scope="module")
def running() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
def server(running: ReplayServer) -> ReplayServer:
    running.reset()
    return running


@pytest.fixture
async def model(server: ReplayServer) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel("gpt-4o-mini", base_url=f"{server.url}/v1", api_key="sk-test", retry_delay=0.001) as m:
        yield m


async def test_text_without_streaming(server: ReplayServer, model: OpenAIModel) -> None:
    server.json(fixture("openai/chat_text.json"))
    request = ModelRequest(
        messages=[Message.system("Be brief."), Message.user("Hi")],
        config={"temperature": 0.2, "maxOutputTokens": 64, "topP": 0.9, "stopSequences": ["END"], "seed": 7},
    )

    response = await model.generate(request)

    assert response.message == Message.model("Hello! How can I help you today?")
    assert response.finish_reason == "stop"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (19, 10, 29)
    [sent] = server.received
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.json() == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "stream": False,
        "temperature": 0.2,
        "max_completion_tokens": 64,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
    }


async def test_length_finish_reason(server: ReplayServer, model: OpenAIModel) -> None:
    server.json(fixture("openai/chat_length.json"))
    response = await model.generate(ModelRequest(messages=[Message.user("Tell a story")]))
    assert (response.message.text, response.finish_reason) == ("Once upon a", "length")


async def test_streamed_text_reaches_on_chunk_in_order(server: ReplayServer, model: OpenAIModel) -> None:
    server.sse(fixture("openai/chat_text_stream.sse"))
    chunks: list[ModelChunk] = []

    response = await model.generate(ModelRequest(messages=[Message.user("Hi")]), on_chunk=chunks.append)

    assert [c.text for c in chunks] == ["Hel", "lo", " there", "!"]
    assert all(c.role == "model" for c in chunks)
    assert response.message == Message.model("Hello there!")
    assert response.finish_reason == "stop"
    assert response.usage is not None and response.usage.total_tokens == 23
    body = server.received[0].json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_tool_call_round_trip(server: ReplayServer, model: OpenAIModel) -> None:
    server.json(fixture("openai/chat_tool_call.json"))
    server.json(fixture("openai/chat_after_tool.json"))
    history = [Message.user("Weather in Paris?")]

    first = await model.generate(ModelRequest(messages=history, tools=[WEATHER], tool_choice="auto"))

    assert first.finish_reason == "stop"
    assert first.message.content == [
        ToolRequestPart(name="get_weather", ref="call_62136354", input={"city": "Paris", "unit": "celsius"})
    ]
    sent = server.received[0].json()
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": WEATHER.input_schema,
                "description": "Current weather for a city.",
            },
        }
    ]
    assert sent["tool_choice"] == "auto"

    answer = ToolResponsePart(name="get_weather", ref="call_62136354", output={"temp": 18, "sky": "sunny"})
    history += [first.message, Message(role="tool", content=[answer])]
    second = await model.generate(ModelRequest(messages=history, tools=[WEATHER]))

    assert second.message.text == "It is 18°C and sunny in Paris."
    messages = server.received[1].json()["messages"]
    assert messages[1] == {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_62136354",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
            }
        ],
    }
    assert messages[2] == {
        "role": "tool",
        "tool_call_id": "call_62136354",
        "content": json.dumps({"temp": 18, "sky": "sunny"}),
    }


async def test_streamed_tool_calls_are_assembled_from_deltas(server: ReplayServer, model: OpenAIModel) -> None:
    server.sse(fixture("openai/chat_tool_call_stream.sse"))
    chunks: list[ModelChunk] = []

    response = await model.generate(
        ModelRequest(messages=[Message.user("Weather and time in Paris?")], tools=[WEATHER]), on_chunk=chunks.append
    )

    assert chunks == []
    assert response.message.tool_requests == [
        ToolRequestPart(name="get_weather", ref="call_62136354", input={"city": "Paris", "unit": "celsius"}),
        ToolRequestPart(name="get_time", ref="call_99a1b2c3", input={"city": "Paris"}),
    ]
    assert response.finish_reason == "stop"
    assert response.usage is not None and response.usage.input_tokens == 82


async def test_media_goes_out_as_image_url(server: ReplayServer, model: OpenAIModel) -> None:
    server.json(fixture("openai/chat_text.json"))
    image = "data:image/png;base64,iVBORw0KGgo="
    message = Message(role="user", content=[TextPart(text="What is this?"), MediaPart(url=image)])

    await model.generate(ModelRequest(messages=[message]))

    assert server.received[0].json()["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": image}},
    ]


async def test_ollama_reasoning_streams_as_reasoning_parts(server: ReplayServer) -> None:
    server.sse(fixture("openai/compat_reasoning_stream.sse"))
    chunks: list[ModelChunk] = []

    async with ollama_model("qwen3:0.6b", base_url=f"{server.url}/v1") as model:
        response = await model.generate(
            ModelRequest(messages=[Message.user("Hi")], config={"maxOutputTokens": 32, "topK": 20}),
            on_chunk=chunks.append,
        )

    assert model.name == "ollama/qwen3:0.6b"
    assert [c.content for c in chunks] == [
        [ReasoningPart(reasoning="The user")],
        [ReasoningPart(reasoning=" greets me.")],
        [TextPart(text="Hi")],
        [TextPart(text="!")],
    ]
    assert response.message.content == [ReasoningPart(reasoning="The user greets me."), TextPart(text="Hi!")]
    body = server.received[0].json()
    assert (body["max_tokens"], body["top_k"]) == (32, 20)
    assert server.received[0].headers["authorization"] == "Bearer ollama"


async def test_401_is_unauthenticated(server: ReplayServer, model: OpenAIModel) -> None:
    server.json(fixture("openai/error_401.json"), status=401)
    with pytest.raises(UnauthenticatedError, match="Incorrect API key provided") as caught:
        await model.generate(ModelRequest(messages=[Message.user("Hi")]))
    assert caught.value.status == "UNAUTHENTICATED"
    assert len(server.received) == 1


async def test_400_is_invalid_argument(server: ReplayServer, model: OpenAIModel) -> None:
    server.json(fixture("openai/error_400.json"), status=400)
    with pytest.raises(InvalidArgumentError, match="tool_call_id"):
        await model.generate(ModelRequest(messages=[Message.user("Hi")]))


@pytest.mark.parametrize(
    ("status", "error"),
    [(403, PermissionDeniedError), (404, NotFoundError), (500, UnavailableError), (503, UnavailableError)],
)
async def test_http_status_maps_to_canonical_error(server: ReplayServer, status: int, error: type[Exception]) -> None:
    server.json({"error": {"message": "nope", "type": "error", "param": None, "code": None}}, status=status)
    async with OpenAIModel("gpt-4o-mini", base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0) as model:
        with pytest.raises(error, match="nope"):
            await model.generate(ModelRequest(messages=[Message.user("Hi")]))


async def test_429_is_retried_then_succeeds(server: ReplayServer, model: OpenAIModel) -> None:
    server.json(fixture("openai/error_429.json"), status=429)
    server.json(fixture("openai/error_429.json"), status=429)
    server.sse(fixture("openai/chat_text_stream.sse"))
    chunks: list[ModelChunk] = []

    response = await model.generate(ModelRequest(messages=[Message.user("Hi")]), on_chunk=chunks.append)

    assert response.message.text == "Hello there!"
    assert "".join(c.text for c in chunks) == "Hello there!"
    assert len(server.received) == 3


async def test_429_every_time_is_resource_exhausted(server: ReplayServer, model: OpenAIModel) -> None:
    for _ in range(3):
        server.json(fixture("openai/error_429.json"), status=429)
    with pytest.raises(ResourceExhaustedError, match="Rate limit reached") as caught:
        await model.generate(ModelRequest(messages=[Message.user("Hi")]))
    assert caught.value.details == {"provider": "openai", "httpStatus": 429}
    assert len(server.received) == 3  # the first attempt and max_retries=2


async def test_error_after_chunks_is_not_retried(server: ReplayServer, model: OpenAIModel) -> None:
    server.sse(fixture("openai/chat_error_stream.sse"))
    chunks: list[ModelChunk] = []
    with pytest.raises(ModelError, match="server had an error"):
        await model.generate(ModelRequest(messages=[Message.user("Hi")]), on_chunk=chunks.append)
    assert [c.text for c in chunks] == ["Hel"]
    assert len(server.received) == 1


async def test_timeout_is_deadline_exceeded(server: ReplayServer) -> None:
    server.replies.append(Reply(body=fixture("openai/chat_text.json"), delay=0.5))
    async with OpenAIModel("gpt-4o-mini", base_url=f"{server.url}/v1", api_key="sk-test", timeout=0.1) as model:
        with pytest.raises(DeadlineExceededError):
            await model.generate(ModelRequest(messages=[Message.user("Hi")]))


def test_missing_api_key_is_unauthenticated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UnauthenticatedError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-4o-mini")


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.delitem(sys.modules, "interlock.models.openai")
    with pytest.raises(ImportError, match=r"pip install 'interlock\[openai\]'"):
        importlib.import_module("interlock.models.openai")
