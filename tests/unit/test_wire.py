"""Wire conversion: every message round-trips, generated or taken from the spec and real captures."""

from __future__ import annotations

import functools
import json
import pathlib
import re
from typing import Any, cast

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.errors import InvalidArgumentError
from interlock.messages import Message, message_from_json, message_to_json, messages_from_json, messages_to_json
from interlock.parts import (
    CustomPart,
    DataPart,
    MediaPart,
    Part,
    ReasoningPart,
    ResourcePart,
    TextPart,
    ToolRequestPart,
    ToolResponsePart,
    part_from_json,
    part_to_json,
)

# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------

KIND_KEYS = frozenset({"text", "media", "toolRequest", "toolResponse", "reasoning", "data", "resource", "custom"})
PART_KEYS = KIND_KEYS | {"metadata"}

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
non_null = json_values.filter(lambda v: v is not None)
json_objects = st.dictionaries(st.text(max_size=5), json_values, max_size=3)
metadata_values = st.dictionaries(
    st.sampled_from(["interrupt", "pendingOutput", "resolvedInterrupt", "resumed", "replacedInput", "source", "x"]),
    json_values,
    max_size=3,
)
metadata_objects = metadata_values | json_objects
refs = st.text(max_size=4)
names = st.text(max_size=8)


@functools.cache
def extras(reserved: frozenset[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Unknown keys (any JSON value, null included) that the converter must carry through."""
    key = st.text(min_size=1, max_size=6).filter(lambda k: k not in reserved)
    return st.dictionaries(key, json_values, max_size=2)


def _with(body: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    return {**extra, **body}


# -- JSON parts ---------------------------------------------------------------


def json_part_body(parts: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[tuple[str, Any]]:
    def tool_request() -> st.SearchStrategy[dict[str, Any]]:
        fields = st.fixed_dictionaries(
            {"name": names}, optional={"ref": refs, "input": non_null, "partial": st.booleans()}
        )
        return st.builds(_with, fields, extras(frozenset({"name", "ref", "input", "partial"})))

    def tool_response() -> st.SearchStrategy[dict[str, Any]]:
        fields = st.fixed_dictionaries(
            {"name": names}, optional={"ref": refs, "output": non_null, "content": st.lists(parts, max_size=2)}
        )
        return st.builds(_with, fields, extras(frozenset({"name", "ref", "output", "content"})))

    media = st.builds(
        _with,
        st.fixed_dictionaries({"url": st.text(max_size=10)}, optional={"contentType": names}),
        extras(frozenset({"url", "contentType"})),
    )
    resource = st.builds(_with, st.fixed_dictionaries({"uri": st.text(max_size=10)}), extras(frozenset({"uri"})))
    return st.one_of(
        st.tuples(st.just("text"), st.text(max_size=10)),
        st.tuples(st.just("reasoning"), st.text(max_size=10)),
        st.tuples(st.just("media"), media),
        st.tuples(st.just("toolRequest"), tool_request()),
        st.tuples(st.just("toolResponse"), tool_response()),
        st.tuples(st.just("data"), json_values),
        st.tuples(st.just("custom"), json_objects),
        st.tuples(st.just("resource"), resource),
    )


@st.composite
def _json_part(draw: st.DrawFn, body: st.SearchStrategy[tuple[str, Any]]) -> dict[str, Any]:
    kind, value = draw(body)
    part: dict[str, Any] = dict(draw(extras(PART_KEYS)))
    part[kind] = value
    if draw(st.booleans()):
        part["metadata"] = draw(metadata_objects)
    if kind != "custom" and draw(st.booleans()):
        part["custom"] = draw(json_objects)
    return part


json_parts: st.SearchStrategy[dict[str, Any]] = st.deferred(lambda: _json_part(_json_bodies))
_json_bodies = json_part_body(json_parts)
roles = st.sampled_from(["system", "user", "model", "tool"]) | st.text(max_size=5)


@st.composite
def json_messages(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = dict(draw(extras(frozenset({"role", "content", "metadata"}))))
    message["role"] = draw(roles)
    message["content"] = draw(st.lists(json_parts, max_size=4))
    if draw(st.booleans()):
        message["metadata"] = draw(metadata_objects)
    return message


# -- domain parts -------------------------------------------------------------

opt_meta = st.none() | metadata_objects
opt_custom = st.none() | json_objects
part_extra = extras(PART_KEYS)


def domain_parts(children: st.SearchStrategy[Part]) -> st.SearchStrategy[Part]:
    common: dict[str, Any] = {"metadata": opt_meta, "custom": opt_custom, "extra": part_extra}
    return st.one_of(
        st.builds(TextPart, text=st.text(max_size=10), **common),
        st.builds(ReasoningPart, reasoning=st.text(max_size=10), **common),
        st.builds(
            MediaPart,
            url=st.text(max_size=10),
            content_type=st.none() | names,
            media_extra=extras(frozenset({"url", "contentType"})),
            **common,
        ),
        st.builds(
            ToolRequestPart,
            name=names,
            ref=st.none() | refs,
            input=json_values,
            partial=st.none() | st.booleans(),
            request_extra=extras(frozenset({"name", "ref", "input", "partial"})),
            **common,
        ),
        st.builds(
            ToolResponsePart,
            name=names,
            ref=st.none() | refs,
            output=json_values,
            content=st.none() | st.lists(children, max_size=2),
            response_extra=extras(frozenset({"name", "ref", "output", "content"})),
            **common,
        ),
        st.builds(DataPart, data=json_values, **common),
        # a custom part's body *is* the wire "custom" object, so it has no separate custom field
        st.builds(CustomPart, value=json_objects, metadata=opt_meta, extra=part_extra),
        st.builds(ResourcePart, uri=st.text(max_size=10), resource_extra=extras(frozenset({"uri"})), **common),
    )


parts_strategy: st.SearchStrategy[Part] = st.deferred(lambda: domain_parts(parts_strategy))
domain_messages = st.builds(
    Message,
    role=roles,
    content=st.lists(parts_strategy, max_size=4),
    metadata=opt_meta,
    extra=extras(frozenset({"role", "content", "metadata"})),
)


def canonical(value: Any) -> str:
    """Strict JSON identity: key order ignored, but 1, 1.0 and true stay distinct."""
    return json.dumps(value, sort_keys=True)


# ---------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(json_messages())
def test_json_messages_round_trip(data: dict[str, Any]) -> None:
    assert canonical(message_to_json(message_from_json(data))) == canonical(data)


@settings(max_examples=300, deadline=None)
@given(domain_messages)
def test_domain_messages_round_trip(message: Message) -> None:
    again = message_from_json(json.loads(json.dumps(message_to_json(message))))
    assert again == message


@settings(max_examples=100, deadline=None)
@given(st.lists(json_messages(), max_size=3))
def test_message_lists_round_trip(data: list[dict[str, Any]]) -> None:
    assert canonical(messages_to_json(messages_from_json(data))) == canonical(data)


# ---------------------------------------------------------------------------
# Everything in the conformance spec and in the recorded wire captures
# ---------------------------------------------------------------------------


def collect(node: Any, messages: list[dict[str, Any]], parts: list[dict[str, Any]]) -> None:
    """Every dict that is a message (string role, list content), and every part in one or in a resume."""
    if isinstance(node, dict):
        d = cast(dict[str, Any], node)
        if isinstance(d.get("role"), str) and isinstance(d.get("content"), list):
            messages.append(d)
            parts.extend(d["content"])
        resume: Any = d.get("resume")
        if isinstance(resume, dict):
            for key in ("respond", "restart"):
                entries: Any = cast(dict[str, Any], resume).get(key)
                if isinstance(entries, list):
                    parts.extend(cast(list[Any], entries))
        for value in d.values():
            collect(value, messages, parts)
    elif isinstance(node, list):
        for value in cast(list[Any], node):
            collect(value, messages, parts)


TRUNCATED = re.compile(r"^\.\.\. \[\d+ more chars\]$", re.M)
SSE_LINE = re.compile(r"^(?:data|error): (\{.*?\})(?:\\n)*$")


def capture_bodies(text: str) -> list[Any]:
    """JSON bodies of the ```http blocks, and the JSON of every SSE line in them."""
    bodies: list[Any] = []
    for block in re.findall(r"```http\n(.*?)```", text, re.S):
        truncated = TRUNCATED.search(block) is not None
        sse = [m.group(1) for line in block.splitlines() if (m := SSE_LINE.match(line))]
        head, _, body = block.partition("\n\n")
        candidates = sse if sse else [body.strip()] if body.strip().startswith("{") else []
        for raw in candidates:
            try:
                bodies.append(json.loads(raw))
            except json.JSONDecodeError:
                # the capture tool cut very long bodies short; a request that is deliberately not JSON
                # is the only other body allowed to fail
                assert truncated or raw == "{not json", f"unparseable body in a capture:\n{head}\n{raw[:200]}"
    return bodies


def check_round_trips(messages: list[dict[str, Any]], parts: list[Any]) -> None:
    failures: list[str] = []
    for m in messages:
        back = message_to_json(message_from_json(m))
        if canonical(back) != canonical(m):
            failures.append(f"message {canonical(m)[:300]}\n  -> {canonical(back)[:300]}")
    for p in parts:
        back = part_to_json(part_from_json(p))
        if canonical(back) != canonical(p):
            failures.append(f"part {canonical(p)[:300]}\n  -> {canonical(back)[:300]}")
    assert not failures, "\n".join(failures)


def test_every_message_in_the_conformance_spec_round_trips(shared_dir: pathlib.Path) -> None:
    spec = yaml.safe_load((shared_dir / "spec" / "agent.yaml").read_text())
    messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    collect(spec, messages, parts)
    assert len(messages) > 100
    kinds = {k for p in parts for k in p if k in KIND_KEYS}
    assert {"text", "toolRequest", "toolResponse"} <= kinds
    assert "resumed" in {k for p in parts for k in cast(dict[str, Any], p.get("metadata") or {})}
    check_round_trips(messages, parts)


def capture_files(shared_dir: pathlib.Path) -> list[pathlib.Path]:
    files = sorted((shared_dir / "reference" / "captures").glob("*.md"))
    assert files, "no captures found"
    return files


def test_every_message_in_the_wire_captures_round_trips(shared_dir: pathlib.Path) -> None:
    messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    per_file: dict[str, int] = {}
    for path in capture_files(shared_dir):
        before = len(messages)
        for body in capture_bodies(path.read_text()):
            collect(body, messages, parts)
        per_file[path.name] = len(messages) - before
    assert all(n > 0 for n in per_file.values()), per_file
    assert len(messages) > 300
    kinds = {k for p in parts for k in p if k in KIND_KEYS}
    assert {"text", "toolRequest", "toolResponse"} <= kinds
    meta_keys = {k for p in parts for k in cast(dict[str, Any], p.get("metadata") or {})}
    assert {"interrupt", "resolvedInterrupt", "resumed"} <= meta_keys
    check_round_trips(messages, parts)


def test_capture_extraction_reads_sse_lines_and_skips_truncated_bodies() -> None:
    text = (
        "```http\nPOST /x HTTP/1.1\nContent-Type: application/json\n\n"
        '{"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}}\n```\n'
        "```http\nHTTP/1.1 200 OK\ncontent-type: text/event-stream\n\n"
        'data: {"message": {"modelChunk": {"role": "model", "content": [{"text": "a"}]}}}\\n\\n\n'
        'error: {"error": {"status": "INTERNAL"}}\\n\\n\n```\n'
        '```http\nHTTP/1.1 200 OK\n\n{"cut": [1, 2\n... [99 more chars]\n```\n'
    )
    bodies = capture_bodies(text)
    assert bodies == [
        {"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}},
        {"message": {"modelChunk": {"role": "model", "content": [{"text": "a"}]}}},
        {"error": {"status": "INTERNAL"}},
    ]


# ---------------------------------------------------------------------------
# Specific behaviour
# ---------------------------------------------------------------------------


def test_null_optional_fields_read_as_absent() -> None:
    data = {
        "role": "model",
        "metadata": None,
        "content": [
            {"text": "hi", "metadata": None, "custom": None},
            {"toolRequest": {"name": "t", "ref": None, "input": None, "partial": None}},
            {"toolResponse": {"name": "t", "ref": None, "output": None, "content": None}},
            {"media": {"url": "data:,", "contentType": None}},
        ],
    }
    message = message_from_json(data)
    assert message.metadata is None
    text, request, response, media = message.content
    assert text == TextPart(text="hi")
    assert request == ToolRequestPart(name="t")
    assert response == ToolResponsePart(name="t")
    assert media == MediaPart(url="data:,")
    assert message_to_json(message) == {
        "role": "model",
        "content": [
            {"text": "hi"},
            {"toolRequest": {"name": "t"}},
            {"toolResponse": {"name": "t"}},
            {"media": {"url": "data:,"}},
        ],
    }
    assert message_from_json({"role": "user", "content": None}).content == []


def test_a_null_kind_key_does_not_decide_the_kind() -> None:
    part = part_from_json({"text": None, "reasoning": "why"})
    assert isinstance(part, ReasoningPart)
    assert part_to_json(part) == {"reasoning": "why", "text": None}


def test_a_data_part_may_hold_null() -> None:
    assert part_from_json({"data": None}) == DataPart(data=None)
    assert part_to_json(DataPart(data=None)) == {"data": None}


def test_metadata_and_unknown_keys_survive() -> None:
    data = {
        "toolRequest": {"name": "pay", "ref": "1", "input": {"a": 1}, "future": [1]},
        "metadata": {"interrupt": {"reason": "x"}},
        "custom": {"p": 1},
        "newKey": "kept",
    }
    part = part_from_json(data)
    assert isinstance(part, ToolRequestPart)
    assert part.is_interrupt
    assert part.custom == {"p": 1}
    assert part.request_extra == {"future": [1]}
    assert part.extra == {"newKey": "kept"}
    assert part_to_json(part) == data


def test_nested_tool_response_content() -> None:
    data = {
        "toolResponse": {
            "name": "render",
            "output": None,
            "content": [{"text": "see"}, {"media": {"url": "https://x/y.png", "contentType": "image/png"}}],
        }
    }
    part = part_from_json(data)
    assert isinstance(part, ToolResponsePart)
    assert part.content == [TextPart(text="see"), MediaPart(url="https://x/y.png", content_type="image/png")]
    assert part_to_json(part) == {"toolResponse": {"name": "render", "content": data["toolResponse"]["content"]}}


@pytest.mark.parametrize(
    "data",
    [{"foo": 1}, {}, {"metadata": {"interrupt": True}}, {"text": None}],
    ids=["unknown-key", "empty", "metadata-only", "only-null-text"],
)
def test_unknown_part_kind_is_invalid_argument(data: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown part kind") as info:
        part_from_json(data)
    assert info.value.status == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("reader", "data"),
    [
        (part_from_json, "text"),
        (part_from_json, {"toolRequest": "not an object"}),
        (part_from_json, {"text": "x", "metadata": [1]}),
        (message_from_json, {"content": []}),
        (message_from_json, {"role": "user", "content": {"text": "x"}}),
        (message_from_json, [1]),
        (messages_from_json, {"role": "user"}),
    ],
)
def test_malformed_json_is_invalid_argument(reader: Any, data: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        reader(data)
