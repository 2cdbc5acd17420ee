"""The Gemini adapter, driven through the real ``google-genai`` SDK against a replay server."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import pytest
from replay.server import ReplayServer, Reply, fixture

from interlock.errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    ResourceExhaustedError,
    UnauthenticatedError,
)
from interlock.messages import Message
from interlock.models import ModelChunk, ModelRequest, ToolDefinition
from interlock.models.gemini import GeminiModel
from interlock.parts import MediaPart, Part, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def camel(value: Any) -> Any:
    """A received body with every key in lowerCamelCase.

    The SDK sends some nested fields in proto snake_case (``mime_type``); the API accepts
    both spellings, so tests compare the camelCase form.
    """
    if isinstance(value, dict):
        items = cast(dict[str, Any], value).items()
        return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): camel(v) for k, v in items}
    if isinstance(value, list):
        return [camel(v) for v in cast(list[Any], value)]
    return value


GENERATE = "/v1beta/models/gemini-2.5-flash:generateContent"
STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


@pytest.fixture(scope="module")
def running() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
def server(running: ReplayServer) -> ReplayServer:
    running.reset()
    return running


@pytest.fixture
async def model(server: ReplayServer) -> AsyncIterator[GeminiModel]:
    async with GeminiModel("gemini-2.5-flash", base_url=server.url, api_key="AIza-test", retry_delay=0.001) as m:
        yield m


async def test_text_without_streaming(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/generate_text.json"))
    request = ModelRequest(
        messages=[Message.system("Be brief."), Message.user("Hi")],
        config={"temperature": 0.2, "maxOutputTokens": 64, "topP": 0.9, "topK": 40, "stopSequences": ["END"]},
    )

    response = await model.generate(request)

    assert model.name == "googleai/gemini-2.5-flash"
    assert response.message == Message.model("Hello! How can I help you today?")
    assert response.finish_reason == "stop"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (8, 10, 18)
    [sent] = server.received
    assert (sent.method, sent.path) == ("POST", GENERATE)
    assert sent.headers["x-goog-api-key"] == "AIza-test"
    body = camel(sent.json())
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}], "role": "user"}
    assert body["generationConfig"] == {
        "temperature": 0.2,
        "maxOutputTokens": 64,
        "topP": 0.9,
        "topK": 40,
        "stopSequences": ["END"],
    }


async def test_max_tokens_is_length(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/generate_max_tokens.json"))
    response = await model.generate(ModelRequest(messages=[Message.user("Tell a story")]))
    assert (response.message.text, response.finish_reason) == ("Once upon a", "length")


async def test_blocked_prompt(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/generate_prompt_blocked.json"))
    response = await model.generate(ModelRequest(messages=[Message.user("...")]))
    assert (response.finish_reason, response.finish_message) == ("blocked", "PROHIBITED_CONTENT")
    assert response.message.content == []


async def test_streamed_text_reaches_on_chunk_in_order(server: ReplayServer, model: GeminiModel) -> None:
    server.sse(fixture("gemini/generate_text_stream.sse"))
    chunks: list[ModelChunk] = []

    response = await model.generate(ModelRequest(messages=[Message.user("Hi")]), on_chunk=chunks.append)

    assert [c.text for c in chunks] == ["Hel", "lo", " there", "!"]
    assert response.message == Message.model("Hello there!")
    assert response.finish_reason == "stop"
    assert response.usage is not None and response.usage.output_tokens == 4
    [sent] = server.received
    assert (sent.path, sent.query) == (STREAM, "alt=sse")


async def test_streamed_thought_and_tool_call_with_id(server: ReplayServer, model: GeminiModel) -> None:
    server.sse(fixture("gemini/generate_thought_tool_stream.sse"))
    chunks: list[ModelChunk] = []

    response = await model.generate(
        ModelRequest(messages=[Message.user("Weather in Paris?")], tools=[WEATHER]), on_chunk=chunks.append
    )

    thought = "**Checking the weather**\n\nThe user asks about Paris."
    assert [c.content for c in chunks] == [[ReasoningPart(reasoning=thought)], [TextPart(text="Let me look that up.")]]
    assert response.message.content == [
        ReasoningPart(reasoning=thought),
        TextPart(text="Let me look that up."),
        ToolRequestPart(
            name="get_weather",
            ref="fc-8k2v1x",
            input={"city": "Paris"},
            metadata={"thoughtSignature": "c2lnbmF0dXJlLXR3bw=="},
        ),
    ]
    assert response.usage is not None and response.usage.custom == {"thoughtsTokens": 40}


async def test_tool_calls_without_ids_round_trip_by_position(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/generate_tool_calls.json"))
    server.json(fixture("gemini/generate_after_tool.json"))
    history = [Message.user("Weather in Paris and Rome?")]

    first = await model.generate(ModelRequest(messages=history, tools=[WEATHER], tool_choice="auto"))

    assert first.message.tool_requests == [
        ToolRequestPart(
            name="get_weather", ref="0", input={"city": "Paris"}, metadata={"thoughtSignature": "c2lnbmF0dXJlLW9uZQ=="}
        ),
        ToolRequestPart(name="get_weather", ref="1", input={"city": "Rome"}),
    ]
    sent = camel(server.received[0].json())
    assert sent["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "parametersJsonSchema": WEATHER.input_schema,
                }
            ]
        }
    ]
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}

    answers: list[Part] = [
        ToolResponsePart(name="get_weather", ref="0", output={"temp": 18}),
        ToolResponsePart(name="get_weather", ref="1", output="24°C, clear"),
    ]
    history += [first.message, Message(role="tool", content=answers)]
    second = await model.generate(ModelRequest(messages=history, tools=[WEATHER]))

    assert second.message.text == "Paris is 18°C and sunny; Rome is 24°C and clear."
    contents = camel(server.received[1].json())["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": "c2lnbmF0dXJlLW9uZQ==",
            },
            {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
        ],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"temp": 18}}},
            {"functionResponse": {"name": "get_weather", "response": {"output": "24°C, clear"}}},
        ],
    }


async def test_tool_result_is_keyed_by_a_real_call_id(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/generate_after_tool.json"))
    call = ToolRequestPart(name="get_weather", ref="fc-8k2v1x", input={"city": "Paris"})
    answer = ToolResponsePart(name="get_weather", ref="fc-8k2v1x", output={"temp": 18})
    history = [Message.user("Weather?"), Message(role="model", content=[call]), Message(role="tool", content=[answer])]

    await model.generate(ModelRequest(messages=history, tools=[WEATHER]))

    contents = camel(server.received[0].json())["contents"]
    assert contents[1]["parts"] == [
        {"functionCall": {"id": "fc-8k2v1x", "name": "get_weather", "args": {"city": "Paris"}}}
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"id": "fc-8k2v1x", "name": "get_weather", "response": {"temp": 18}}}
    ]


async def test_media_goes_out_inline_and_by_uri(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/generate_text.json"))
    message = Message(
        role="user",
        content=[
            TextPart(text="Compare these."),
            MediaPart(url="data:image/png;base64,iVBORw0KGgo="),
            MediaPart(url="https://example.com/cat.jpg", content_type="image/jpeg"),
        ],
    )

    await model.generate(ModelRequest(messages=[message]))

    assert camel(server.received[0].json())["contents"][0]["parts"] == [
        {"text": "Compare these."},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
        {"fileData": {"fileUri": "https://example.com/cat.jpg", "mimeType": "image/jpeg"}},
    ]


async def test_json_output_is_constrained(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/generate_text.json"))
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    await model.generate(ModelRequest(messages=[Message.user("Hi")], output={"format": "json", "schema": schema}))
    config = camel(server.received[0].json())["generationConfig"]
    assert (config["responseMimeType"], config["responseJsonSchema"]) == ("application/json", schema)


async def test_unknown_config_is_invalid_argument(server: ReplayServer, model: GeminiModel) -> None:
    with pytest.raises(InvalidArgumentError, match="noSuchOption"):
        await model.generate(ModelRequest(messages=[Message.user("Hi")], config={"noSuchOption": 1}))
    assert server.received == []


async def test_401_is_unauthenticated(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/error_401.json"), status=401)
    with pytest.raises(UnauthenticatedError, match="invalid authentication credentials"):
        await model.generate(ModelRequest(messages=[Message.user("Hi")]))
    assert len(server.received) == 1


async def test_invalid_api_key_is_unauthenticated(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/error_400_api_key.json"), status=400)
    with pytest.raises(UnauthenticatedError, match="API key not valid"):
        await model.generate(ModelRequest(messages=[Message.user("Hi")]))


async def test_429_is_retried_then_succeeds(server: ReplayServer, model: GeminiModel) -> None:
    server.json(fixture("gemini/error_429.json"), status=429)
    server.json(fixture("gemini/error_429.json"), status=429)
    server.sse(fixture("gemini/generate_text_stream.sse"))
    chunks: list[ModelChunk] = []

    response = await model.generate(ModelRequest(messages=[Message.user("Hi")]), on_chunk=chunks.append)

    assert response.message.text == "Hello there!"
    assert len(chunks) == 4
    assert len(server.received) == 3


async def test_429_every_time_is_resource_exhausted(server: ReplayServer, model: GeminiModel) -> None:
    for _ in range(3):
        server.json(fixture("gemini/error_429.json"), status=429)
    with pytest.raises(ResourceExhaustedError, match="exceeded your current quota"):
        await model.generate(ModelRequest(messages=[Message.user("Hi")]))
    assert len(server.received) == 3


async def test_timeout_is_deadline_exceeded(server: ReplayServer) -> None:
    server.replies.append(Reply(body=fixture("gemini/generate_text.json"), delay=0.5))
    async with GeminiModel("gemini-2.5-flash", base_url=server.url, api_key="k", timeout=0.1, max_retries=0) as model:
        with pytest.raises(DeadlineExceededError):
            await model.generate(ModelRequest(messages=[Message.user("Hi")]))


def test_missing_api_key_is_unauthenticated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(UnauthenticatedError, match="GEMINI_API_KEY"):
        GeminiModel("gemini-2.5-flash")


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google.genai", None)
    monkeypatch.delitem(sys.modules, "interlock.models.gemini")
    with pytest.raises(ImportError, match=r"pip install 'interlock\[gemini\]'"):
        importlib.import_module("interlock.models.gemini")
