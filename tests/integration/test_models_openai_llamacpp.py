"""The OpenAI-compatible adapter against llama.cpp's own OpenAI-compatible server running the embedded model.

``python -m llama_cpp.server`` (llama-cpp-python's server, needs ``llama-cpp-python[server]``) runs in a real
subprocess, once per module, serving Qwen2.5-Coder-0.5B from the assembled GGUF. The tests talk to it only through
``resolve_model("openai-compatible/...")``: the real ``openai`` SDK over real HTTP. Greedy, short token limits.

The server uses the chat template stored in the GGUF (no ``--chat_format``): that is the only way this server returns
OpenAI ``tool_calls`` for this model, and only for a named ``tool_choice`` (see the tool tests).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from interlock.errors import InvalidArgumentError, UnauthenticatedError, UnavailableError
from interlock.messages import Message
from interlock.models import ModelChunk, ModelRequest, ToolDefinition
from interlock.models._registry import resolve_model
from interlock.models._weights import model_path
from interlock.models.openai import OpenAIModel
from interlock.parts import TextPart, ToolRequestPart, ToolResponsePart

pytestmark = pytest.mark.slow

ALIAS = "qwen2.5-coder-0.5b"
API_KEY = "llamacpp-test-key"
TRANSFER = ToolDefinition(
    name="transferMoney",
    description="Transfer money to a person.",
    input_schema={
        "type": "object",
        "properties": {
            "to": {"type": "string", "description": "Who receives the money"},
            "amount": {"type": "number", "description": "Amount in dollars"},
        },
        "required": ["to", "amount"],
    },
)
SYSTEM = Message.system("You are a banking assistant. Use transferMoney for transfers.")
ALICE = {"to": "Alice", "amount": 150}
NAMED_TRANSFER = {"type": "function", "function": {"name": "transferMoney"}}
"""OpenAI's named tool choice; ``ModelRequest.tool_choice`` has no such value, so it goes through ``config``."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class LlamaServer:
    url: str
    """The API root, ``http://127.0.0.1:<port>/v1``."""
    log: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    port = free_port()
    log = tmp_path_factory.mktemp("llamacpp") / "server.log"
    threads = str(min(2, len(os.sched_getaffinity(0))))
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path()),
        "--model_alias",
        ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        threads,
        "--n_threads_batch",
        threads,
        "--api_key",
        API_KEY,
        "--verbose",
        "False",
    ]
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_until_ready(proc, url, log)
        yield LlamaServer(url=f"{url}/v1", log=log)
    finally:
        proc.terminate()  # uvicorn shuts down cleanly on SIGTERM
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            pytest.fail(f"the llama.cpp server ignored SIGTERM; log:\n{log.read_text()}")


def _wait_until_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=2) as http:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the llama.cpp server exited with {proc.returncode}; log:\n{log.read_text()}")
            try:
                response = http.get("/v1/models")
                if response.status_code == 200:
                    assert [m["id"] for m in response.json()["data"]] == [ALIAS]
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the llama.cpp server did not answer /v1/models within 120 s; log:\n{log.read_text()}")
            time.sleep(0.1)


async def _open(base_url: str, *, name: str = ALIAS, **options: Any) -> OpenAIModel:
    options.setdefault("api_key", API_KEY)
    model = resolve_model(f"openai-compatible/{name}", base_url=base_url, timeout=120, **options)
    assert isinstance(model, OpenAIModel)
    return model


@pytest.fixture
async def model(server: LlamaServer) -> AsyncIterator[OpenAIModel]:
    async with await _open(server.url) as m:
        yield m


def _ask(text: str, max_tokens: int, **config: Any) -> ModelRequest:
    return ModelRequest(
        messages=[Message.user(text)], config={"temperature": 0, "maxOutputTokens": max_tokens, **config}
    )


def _transfer(*, tool_choice: Literal["auto", "required"] | None = None, named: bool = False) -> ModelRequest:
    config: dict[str, Any] = {"temperature": 0, "maxOutputTokens": 48}
    if named:
        config["tool_choice"] = NAMED_TRANSFER  # provider-native options pass through in the request body
    return ModelRequest(
        messages=[SYSTEM, Message.user("Transfer $150 to Alice")],
        tools=[TRANSFER],
        tool_choice=tool_choice,
        config=config,
    )


# --- text ---------------------------------------------------------------------------------------------------------


async def test_text_answer_without_streaming(model: OpenAIModel) -> None:
    response = await model.generate(_ask("What is the capital of France? Answer in one word.", 16))

    assert model.name == f"openai-compatible/{ALIAS}"
    assert [type(p) for p in response.message.content] == [TextPart]
    assert "Paris" in response.message.text
    assert response.finish_reason == "stop"
    usage = response.usage
    assert usage is not None and usage.input_tokens and usage.output_tokens
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


async def test_length_limit_maps_to_length(model: OpenAIModel) -> None:
    response = await model.generate(_ask("Count from 1 to 50, separated by spaces.", 8))

    assert response.finish_reason == "length"
    assert response.usage is not None and response.usage.output_tokens == 8
    assert response.message.text.startswith("1 2 3")


async def test_streamed_answer_reaches_on_chunk_in_order(model: OpenAIModel) -> None:
    chunks: list[ModelChunk] = []

    response = await model.generate(_ask("Count from 1 to 5, separated by spaces.", 16), on_chunk=chunks.append)

    assert len(chunks) >= 5  # one token at a time
    assert all(c.role == "model" and [type(p) for p in c.content] == [TextPart] for c in chunks)
    assert "".join(c.text for c in chunks) == response.message.text
    assert response.message.text.split() == ["1", "2", "3", "4", "5"]
    assert response.finish_reason == "stop"
    # llama-cpp-python 0.3.36 ignores stream_options.include_usage: a streamed answer carries no usage.
    assert response.usage is None


async def test_unknown_model_name_is_served_by_the_loaded_model(server: LlamaServer) -> None:
    # llama-cpp-python's server does not reject a model it does not know: it answers with its default model
    # (and echoes the requested name), so there is no NOT_FOUND to map here.
    async with await _open(server.url, name="no-such-model") as model:
        response = await model.generate(_ask("Say hi.", 4))
    assert response.message.text
    assert getattr(response.raw, "model", None) == "no-such-model"


# --- tools --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_choice", ["auto", "required"])
async def test_tool_definitions_are_accepted_but_auto_choice_answers_in_text(
    model: OpenAIModel, tool_choice: Literal["auto", "required"]
) -> None:
    # With the GGUF's own template the server renders our tool schemas into the prompt, but only a *named*
    # tool_choice makes it constrain and parse the output into tool_calls. For "auto" (and "required", which it
    # does not enforce) it returns the model's raw text: Qwen2.5-Coder-0.5B writes the call as a fenced JSON block.
    # `--chat_format chatml-function-calling` does not help with this model: for "auto" it returns the literal text
    # "functions.transferMoney:" with no tool_calls (its "message" branch is constrained by the tool-name grammar).
    response = await model.generate(_transfer(tool_choice=tool_choice))

    assert response.message.tool_requests == []
    text = response.message.text
    assert '"transferMoney"' in text and '"Alice"' in text and "150" in text
    assert response.finish_reason == "stop"


async def test_named_tool_choice_returns_a_tool_call(model: OpenAIModel) -> None:
    response = await model.generate(_transfer(named=True))

    [call] = response.message.content
    assert isinstance(call, ToolRequestPart)
    assert (call.name, call.input) == ("transferMoney", ALICE)
    assert call.ref and call.ref.startswith("call_")
    assert response.message.text == ""
    assert response.finish_reason == "stop"  # OpenAI's "tool_calls"
    assert response.usage is not None and response.usage.output_tokens

    # The call and its result go back as assistant tool_calls and a tool message keyed by the ref.
    result = ToolResponsePart(name="transferMoney", ref=call.ref, output={"status": "ok", "id": "tx_123"})
    history = [SYSTEM, Message.user("Transfer $150 to Alice"), response.message, Message(role="tool", content=[result])]
    after = await model.generate(
        ModelRequest(messages=history, tools=[TRANSFER], config={"temperature": 0, "maxOutputTokens": 24})
    )
    assert after.message.content
    assert after.usage is not None and after.usage.input_tokens and response.usage.input_tokens
    assert after.usage.input_tokens > response.usage.input_tokens


async def test_streamed_tool_call_is_assembled(model: OpenAIModel) -> None:
    chunks: list[ModelChunk] = []

    response = await model.generate(_transfer(named=True), on_chunk=chunks.append)

    # The server sends the id and the whole function name again in every delta: they must not be concatenated.
    [call] = response.message.content
    assert isinstance(call, ToolRequestPart)
    assert (call.name, call.input) == ("transferMoney", ALICE)
    assert call.ref and call.ref.startswith("call_")
    assert chunks == []  # the arguments are not streamed as text
    assert response.finish_reason == "stop"


# --- errors -------------------------------------------------------------------------------------------------------


async def test_prompt_over_the_context_window_is_invalid_argument(model: OpenAIModel) -> None:
    with pytest.raises(InvalidArgumentError, match="maximum context length is 2048 tokens") as info:
        await model.generate(_ask("word " * 3000, 4))
    assert info.value.details == {"provider": "openai-compatible", "httpStatus": 400}


async def test_wrong_api_key_is_unauthenticated(server: LlamaServer) -> None:
    async with await _open(server.url, api_key="not-the-key") as model:
        with pytest.raises(UnauthenticatedError, match="HTTP 401") as info:
            await model.generate(_ask("Hi", 4))
    assert info.value.details["httpStatus"] == 401


async def test_invalid_parameter_comes_back_as_http_500(server: LlamaServer) -> None:
    # llama-cpp-python's error handler turns FastAPI's request validation error into HTTP 500, not 422,
    # so an invalid option maps to UNAVAILABLE (and would be retried: here retries are off).
    async with await _open(server.url, max_retries=0) as model:
        with pytest.raises(UnavailableError, match="top_k") as info:
            await model.generate(_ask("Hi", 4, topK=-1))
    assert info.value.details["httpStatus"] == 500


async def test_server_not_listening_is_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    async with await _open(url, max_retries=1, retry_delay=0.01) as model:
        with pytest.raises(UnavailableError, match="could not reach openai-compatible"):
            await model.generate(_ask("Hi", 4))
