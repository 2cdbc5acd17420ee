"""The one place that converts between our types and Genkit's camelCase JSON.

Conversions are lossless: keys we do not model are kept in each type's ``extra``
dictionary and written back in place, so any message round-trips unchanged. ``null``
for an optional field reads as absent (Genkit omits optional fields).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from .agent_io import AgentInit, AgentInput, AgentOutput, StreamChunk, TurnEnd
from .claims import claim_state
from .errors import InvalidArgumentError
from .interrupts import Resume
from .messages import Message
from .models import ModelChunk
from .parts import (
    CustomPart,
    DataPart,
    MediaPart,
    Part,
    ReasoningPart,
    ResourcePart,
    TextPart,
    ToolRequestPart,
    ToolResponsePart,
)
from .sessions import Artifact, CustomPatch, ErrorInfo, SessionState, Snapshot

T = TypeVar("T")

__all__ = [
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "part_from_json",
    "part_to_json",
]

_COMMON = ("metadata", "custom")
_KINDS = ("text", "media", "toolRequest", "toolResponse", "reasoning", "data", "resource")


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{what} must be a JSON object, got {type(value).__name__}")
    return cast(dict[str, Any], value)


def _rest(d: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in known}


def _opt_dict(d: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = d.get(key)
    return None if value is None else _obj(value, key)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"a part's {what!r} must be a string, got {type(value).__name__}")
    return value


def part_from_json(data: Any) -> Part:
    """Read one Genkit part (``{"text": ...}``, ``{"toolRequest": {...}}``, ...)."""
    d = _obj(data, "a part")
    common: dict[str, Any] = {"metadata": _opt_dict(d, "metadata")}
    kind = next((k for k in _KINDS if d.get(k) is not None), None)
    if kind is None and "data" in d:
        kind = "data"  # a data part may hold null; it is written as {"data": null}
    if kind is None and isinstance(d.get("custom"), dict):
        return CustomPart(value=d["custom"], metadata=common["metadata"], extra=_rest(d, _COMMON))
    common["custom"] = _opt_dict(d, "custom")
    if kind is None:
        raise InvalidArgumentError(f"unknown part kind with keys {sorted(d)!r}; expected one of {list(_KINDS)!r}")
    common["extra"] = _rest(d, (*_COMMON, kind))
    body = d[kind]
    if kind == "text":
        return TextPart(text=_text(body, "text"), **common)
    if kind == "reasoning":
        return ReasoningPart(reasoning=_text(body, "reasoning"), **common)
    if kind == "data":
        return DataPart(data=body, **common)
    b = _obj(body, kind)
    if kind == "toolRequest":
        return ToolRequestPart(
            name=_text(b.get("name", ""), "toolRequest.name"),
            ref=b.get("ref"),
            input=b.get("input"),
            partial=b.get("partial"),
            request_extra=_rest(b, ("name", "ref", "input", "partial")),
            **common,
        )
    if kind == "toolResponse":
        content = b.get("content")
        return ToolResponsePart(
            name=_text(b.get("name", ""), "toolResponse.name"),
            ref=b.get("ref"),
            output=b.get("output"),
            content=None if content is None else [part_from_json(p) for p in content],
            response_extra=_rest(b, ("name", "ref", "output", "content")),
            **common,
        )
    if kind == "media":
        return MediaPart(
            url=_text(b.get("url", ""), "media.url"),
            content_type=b.get("contentType"),
            media_extra=_rest(b, ("url", "contentType")),
            **common,
        )
    return ResourcePart(uri=_text(b.get("uri", ""), "resource.uri"), resource_extra=_rest(b, ("uri",)), **common)


def _put(d: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        d[key] = value


def _body(part: Part) -> tuple[str, Any]:
    if isinstance(part, TextPart):
        return "text", part.text
    if isinstance(part, ToolRequestPart):
        b: dict[str, Any] = {"name": part.name}
        _put(b, "ref", part.ref)
        _put(b, "input", part.input)
        _put(b, "partial", part.partial)
        return "toolRequest", b | part.request_extra
    if isinstance(part, ToolResponsePart):
        b = {"name": part.name}
        _put(b, "ref", part.ref)
        _put(b, "output", part.output)
        if part.content is not None:
            b["content"] = [part_to_json(p) for p in part.content]
        return "toolResponse", b | part.response_extra
    if isinstance(part, ReasoningPart):
        return "reasoning", part.reasoning
    if isinstance(part, MediaPart):
        b = {"url": part.url}
        _put(b, "contentType", part.content_type)
        return "media", b | part.media_extra
    if isinstance(part, DataPart):
        return "data", part.data
    if isinstance(part, ResourcePart):
        return "resource", {"uri": part.uri} | part.resource_extra
    return "custom", part.value


def part_to_json(part: Part) -> dict[str, Any]:
    """Write one part as Genkit JSON."""
    key, body = _body(part)
    d: dict[str, Any] = {key: body}
    if part.metadata is not None:
        d["metadata"] = part.metadata
    if part.custom is not None and not isinstance(part, CustomPart):
        d["custom"] = part.custom
    if part.extra:
        d.update(part.extra)
    return d


def message_from_json(data: Any) -> Message:
    """Read one Genkit message (``{"role": ..., "content": [...]}``)."""
    d = _obj(data, "a message")
    role = d.get("role")
    if not isinstance(role, str):
        raise InvalidArgumentError("a message needs a string 'role' (system, user, model or tool)")
    content: Any = d.get("content") or []
    if not isinstance(content, list):
        raise InvalidArgumentError("a message's 'content' must be a list of parts")
    return Message(
        role=role,
        content=[part_from_json(p) for p in cast(list[Any], content)],
        metadata=_opt_dict(d, "metadata"),
        extra=_rest(d, ("role", "content", "metadata")),
    )


def message_to_json(message: Message) -> dict[str, Any]:
    """Write one message as Genkit JSON."""
    d: dict[str, Any] = {"role": message.role, "content": [part_to_json(p) for p in message.content]}
    if message.metadata is not None:
        d["metadata"] = message.metadata
    if message.extra:
        d.update(message.extra)
    return d


def messages_from_json(data: Any) -> list[Message]:
    """Read a list of messages."""
    if not isinstance(data, list):
        raise InvalidArgumentError("messages must be a JSON list")
    return [message_from_json(m) for m in cast(list[Any], data)]


def messages_to_json(messages: list[Message]) -> list[dict[str, Any]]:
    """Write a list of messages."""
    return [message_to_json(m) for m in messages]


# Sessions, snapshots and the agent protocol -------------------------------------------------


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(value: Any) -> datetime | None:
    """Parse an RFC 3339 timestamp (``Z`` or an offset); naive values are taken as UTC."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgumentError(f"expected an RFC 3339 timestamp string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(f"expected an RFC 3339 timestamp, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def artifact_to_json(artifact: Artifact) -> dict[str, Any]:
    """Write an artifact."""
    d: dict[str, Any] = {}
    _put(d, "name", artifact.name)
    d["parts"] = [part_to_json(p) for p in artifact.parts]
    _put(d, "metadata", artifact.metadata)
    return d


def artifact_from_json(data: Any) -> Artifact:
    """Read an artifact."""
    d = _obj(data, "an artifact")
    parts: Any = d.get("parts") or []
    return Artifact(
        name=d.get("name"),
        parts=[part_from_json(p) for p in cast(list[Any], parts)],
        metadata=_opt_dict(d, "metadata"),
    )


def state_to_json(state: SessionState) -> dict[str, Any]:
    """Write session state (``{sessionId, messages, custom, artifacts}``)."""
    d: dict[str, Any] = {}
    _put(d, "sessionId", state.session_id)
    d["messages"] = messages_to_json(state.messages)
    _put(d, "custom", state.custom)
    d["artifacts"] = [artifact_to_json(a) for a in state.artifacts]
    return d


def state_from_json(data: Any) -> SessionState:
    """Read session state."""
    d = _obj(data, "state")
    artifacts: Any = d.get("artifacts") or []
    return SessionState(
        session_id=d.get("sessionId"),
        messages=messages_from_json(d.get("messages") or []),
        custom=d.get("custom"),
        artifacts=[artifact_from_json(a) for a in cast(list[Any], artifacts)],
    )


def error_to_json(error: ErrorInfo) -> dict[str, Any]:
    """Write an error (``{status, message, details?}``)."""
    d: dict[str, Any] = {"status": error.status, "message": error.message}
    _put(d, "details", error.details)
    return d


def error_from_json(data: Any) -> ErrorInfo:
    """Read an error."""
    d = _obj(data, "an error")
    return ErrorInfo(
        status=str(d.get("status") or "UNKNOWN"), message=str(d.get("message", "")), details=d.get("details")
    )


def snapshot_to_json(
    snapshot: Snapshot, *, status: str | None = None, state: SessionState | None = None
) -> dict[str, Any]:
    """Write a snapshot as Genkit's ``SessionSnapshot`` (``status``/``state`` override what is read)."""
    d: dict[str, Any] = {"snapshotId": snapshot.snapshot_id, "sessionId": snapshot.session_id}
    _put(d, "parentId", snapshot.parent_id)
    d["createdAt"] = _time(snapshot.created_at)
    _put(d, "updatedAt", _time(snapshot.updated_at))
    _put(d, "heartbeatAt", _time(snapshot.heartbeat_at))
    d["status"] = status or snapshot.status
    _put(d, "finishReason", snapshot.finish_reason)
    if snapshot.error is not None:
        d["error"] = error_to_json(snapshot.error)
    state = state or snapshot.state
    if state is not None:
        d["state"] = state_to_json(state)
    if snapshot.claimed_by:
        # interlock's extension (Genkit clients ignore it): who answers the interrupt, and until when
        claim = {"holder": snapshot.claimed_by, "state": claim_state(snapshot)}
        _put(claim, "expiresAt", _time(snapshot.claim_expires_at))
        d["claim"] = claim
    return d


def snapshot_from_json(data: Any) -> Snapshot:
    """Read a ``SessionSnapshot`` (unknown statuses are kept; a missing status reads as completed)."""
    d = _obj(data, "a snapshot")
    state: Any = d.get("state")
    inner: Any = cast(dict[str, Any], state).get("sessionId") if isinstance(state, dict) else None
    session_id: Any = d.get("sessionId") or inner or ""
    return Snapshot(
        snapshot_id=str(d.get("snapshotId", "")),
        session_id=str(session_id),
        parent_id=d.get("parentId") or None,
        created_at=parse_time(d.get("createdAt")) or datetime.fromtimestamp(0, UTC),
        updated_at=parse_time(d.get("updatedAt")),
        heartbeat_at=parse_time(d.get("heartbeatAt")),
        status=str(d.get("status") or "completed"),
        finish_reason=d.get("finishReason"),
        error=None if d.get("error") is None else error_from_json(d["error"]),
        state=None if state is None else state_from_json(state),
        **_claim_from_json(d.get("claim")),
    )


def _claim_from_json(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(cast(dict[str, Any], data).get("holder"), str):
        return {}
    claim = cast(dict[str, Any], data)
    expires = parse_time(claim.get("expiresAt"))
    if expires is None and claim.get("state") != "answered":
        expires = datetime.fromtimestamp(0, UTC)  # held without a readable expiry: treat as lapsed
    return {"claimed_by": claim["holder"], "claim_expires_at": expires}


def resume_to_json(resume: Resume) -> dict[str, Any]:
    """Write a resume (``{respond?, restart?, metadata?}``)."""
    d: dict[str, Any] = {}
    if resume.respond:
        d["respond"] = [part_to_json(p) for p in resume.respond]
    if resume.restart:
        d["restart"] = [part_to_json(p) for p in resume.restart]
    _put(d, "metadata", resume.metadata)
    return d


def _parts_of(data: Any, kind: type[T], what: str) -> list[T]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise InvalidArgumentError(f"resume.{what} must be a list of parts")
    parts = [part_from_json(p) for p in cast(list[Any], data)]
    for p in parts:
        if not isinstance(p, kind):
            raise InvalidArgumentError(f"resume.{what} takes only {kind.__name__} parts, got {p.kind}")
    return cast(list[T], parts)


def resume_from_json(data: Any) -> Resume:
    """Read a resume."""
    d = _obj(data, "resume")
    return Resume(
        respond=_parts_of(d.get("respond"), ToolResponsePart, "respond"),
        restart=_parts_of(d.get("restart"), ToolRequestPart, "restart"),
        metadata=d.get("metadata"),
    )


def input_to_json(value: AgentInput) -> dict[str, Any]:
    """Write an ``AgentInput``."""
    d: dict[str, Any] = {}
    if value.message is not None:
        d["message"] = message_to_json(value.message)
    if value.resume is not None:
        d["resume"] = resume_to_json(value.resume)
    if value.detach:
        d["detach"] = True
    return d


def input_from_json(data: Any) -> AgentInput:
    """Read an ``AgentInput`` (unknown keys are ignored)."""
    d = _obj(data if data is not None else {}, "data (an AgentInput)")
    detach = d.get("detach")
    if detach is not None and not isinstance(detach, bool):
        raise InvalidArgumentError("'detach' must be a boolean")
    return AgentInput(
        message=None if d.get("message") is None else message_from_json(d["message"]),
        resume=None if d.get("resume") is None else resume_from_json(d["resume"]),
        detach=bool(detach),
    )


def init_to_json(init: AgentInit) -> dict[str, Any]:
    """Write an ``AgentInit``."""
    d: dict[str, Any] = {}
    _put(d, "sessionId", init.session_id)
    _put(d, "snapshotId", init.snapshot_id)
    if init.state is not None:
        d["state"] = state_to_json(init.state)
    return d


def _opt_str(d: dict[str, Any], key: str) -> str | None:
    value = d.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{key!r} must be a string")
    return value


def init_from_json(data: Any) -> AgentInit:
    """Read an ``AgentInit`` (missing or empty is a fresh session)."""
    d = _obj(data if data is not None else {}, "init (an AgentInit)")
    return AgentInit(
        session_id=_opt_str(d, "sessionId"),
        snapshot_id=_opt_str(d, "snapshotId"),
        state=None if d.get("state") is None else state_from_json(d["state"]),
    )


def output_to_json(output: AgentOutput) -> dict[str, Any]:
    """Write an ``AgentOutput``."""
    d: dict[str, Any] = {}
    _put(d, "sessionId", output.session_id)
    _put(d, "snapshotId", output.snapshot_id)
    if output.state is not None:
        d["state"] = state_to_json(output.state)
    if output.message is not None:
        d["message"] = message_to_json(output.message)
    d["artifacts"] = [artifact_to_json(a) for a in output.artifacts]
    _put(d, "finishReason", output.finish_reason)
    if output.error is not None:
        d["error"] = error_to_json(output.error)
    return d


def output_from_json(data: Any) -> AgentOutput:
    """Read an ``AgentOutput``."""
    d = _obj(data, "an AgentOutput")
    artifacts: Any = d.get("artifacts") or []
    return AgentOutput(
        session_id=d.get("sessionId"),
        snapshot_id=d.get("snapshotId") or None,
        state=None if d.get("state") is None else state_from_json(d["state"]),
        message=None if d.get("message") is None else message_from_json(d["message"]),
        artifacts=[artifact_from_json(a) for a in cast(list[Any], artifacts)],
        finish_reason=d.get("finishReason"),
        error=None if d.get("error") is None else error_from_json(d["error"]),
    )


def model_chunk_to_json(chunk: ModelChunk) -> dict[str, Any]:
    """Write a ``ModelResponseChunk``."""
    d: dict[str, Any] = {}
    _put(d, "role", chunk.role)
    _put(d, "index", chunk.index)
    d["content"] = [part_to_json(p) for p in chunk.content]
    _put(d, "custom", chunk.custom)
    d.update(chunk.extra)
    return d


def model_chunk_from_json(data: Any) -> ModelChunk:
    """Read a ``ModelResponseChunk``."""
    d = _obj(data, "a model chunk")
    content: Any = d.get("content") or []
    return ModelChunk(
        role=d.get("role"),
        index=d.get("index"),
        content=[part_from_json(p) for p in cast(list[Any], content)],
        custom=_opt_dict(d, "custom"),
        extra=_rest(d, ("role", "index", "content", "custom")),
    )


def chunk_to_json(chunk: StreamChunk) -> dict[str, Any]:
    """Write an ``AgentStreamChunk`` (exactly one key set)."""
    if isinstance(chunk, ModelChunk):
        return {"modelChunk": model_chunk_to_json(chunk)}
    if isinstance(chunk, Artifact):
        return {"artifact": artifact_to_json(chunk)}
    if isinstance(chunk, CustomPatch):
        return {"customPatch": chunk.ops}
    d: dict[str, Any] = {}
    _put(d, "snapshotId", chunk.snapshot_id)
    _put(d, "finishReason", chunk.finish_reason)
    return {"turnEnd": d}


def chunk_from_json(data: Any) -> StreamChunk:
    """Read an ``AgentStreamChunk``."""
    d = _obj(data, "a stream chunk")
    if d.get("modelChunk") is not None:
        return model_chunk_from_json(d["modelChunk"])
    if d.get("artifact") is not None:
        return artifact_from_json(d["artifact"])
    if d.get("customPatch") is not None:
        return CustomPatch(ops=cast(list[dict[str, Any]], d["customPatch"]))
    if "turnEnd" in d:
        t = _obj(d.get("turnEnd") or {}, "turnEnd")
        return TurnEnd(snapshot_id=t.get("snapshotId"), finish_reason=t.get("finishReason"))
    raise InvalidArgumentError(f"unknown stream chunk with keys {sorted(d)!r}")
