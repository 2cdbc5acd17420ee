"""Sub-agent interrupts surfaced in the delegating agent's paused message, and answers routed back down.

A delegation tool (:mod:`interlock.agents._delegation`) whose sub-agent paused pauses too, with the
interrupt data ``{"delegated": record}``: the sub-agent, where its paused turn is (a snapshot
id, or its state), and its interrupts. Inside the tool loop the paused message is kept that
way (*collapsed*). Everywhere else (the stored snapshot, the output, the stream, the inbox)
it is *expanded* by :func:`expand`: the call is marked ``delegated`` instead of paused, and
each of the sub-agent's interrupts follows it as a tool request of its own, with its tool's
name and input, a ref unique in the message (:func:`surfaced_ref`), ``agentPath`` and
``surfacedFrom``. So a person answers them as if the delegating agent had paused on them, and
``tool.interrupted(part)`` of the sub-agent's tool claims them.

A resume of an expanded message is validated as any other (every surfaced interrupt must be
answered; unknown names and refs are refused before anything runs). :func:`collapse` then
turns it back into the tool loop's form: the answers to one call's surfaced interrupts
become one restart of that call, whose payload is the sub-agent's resume
(``{"delegation": record, "resume": {respond, restart}}``, with the sub-agent's own refs and
resume tokens). Nested delegations surface level by level, so this works to any depth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from .. import metadata as md
from ..errors import ResumeError
from ..interrupts._plan import PlannedCall, Resume, ResumePlan
from ..messages import Message
from ..parts import Part, ToolRequestPart, ToolResponsePart, with_metadata

if TYPE_CHECKING:
    from ..tools._tool import Tool


@dataclass(frozen=True, kw_only=True, slots=True)
class Pause:
    """Where a sub-agent's turn paused: the record a paused delegation call carries (``metadata.delegated``)."""

    agent: str
    """The sub-agent's name (the next name of the surfaced interrupts' ``agentPath``)."""
    session_id: str | None = None
    snapshot_id: str | None = None
    """The paused snapshot (server-managed sub-agent), resumed by the answers."""
    state: dict[str, Any] | None = None
    """The paused state as wire JSON (client-managed sub-agent), sent back with the answers."""
    interrupts: tuple[ToolRequestPart, ...] = ()
    """The sub-agent's interrupts, as it gave them (its refs and resume tokens)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "sessionId": self.session_id,
            "snapshotId": self.snapshot_id,
            "state": self.state,
            "interrupts": [p.to_json() for p in self.interrupts],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pause:
        raw: Any = data.get("interrupts")
        state: Any = data.get("state")
        return cls(
            agent=str(data.get("agent")),
            session_id=_str(data.get("sessionId")),
            snapshot_id=_str(data.get("snapshotId")),
            state=cast(dict[str, Any], state) if isinstance(state, dict) else None,
            interrupts=tuple(ToolRequestPart.from_json(p) for p in cast(list[Any], raw))
            if isinstance(raw, list)
            else (),
        )

    def interrupt_data(self) -> dict[str, Any]:
        """The interrupt data of the delegation call that pauses on this (collapsed form)."""
        return {md.DELEGATED: self.to_json()}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def forwarded(resumed: Mapping[str, Any]) -> tuple[Pause, Resume]:
    """A delegation restart's payload, read: where the sub-agent paused, and the answers for it."""
    record: Any = resumed.get("delegation")
    answers: Any = resumed.get("resume")
    pause = Pause.from_json(cast(dict[str, Any], record) if isinstance(record, dict) else {})
    answers = cast(dict[str, Any], answers) if isinstance(answers, dict) else {}
    respond: Any = answers.get("respond") or []
    restart: Any = answers.get("restart") or []
    return pause, Resume(
        respond=[ToolResponsePart.from_json(p) for p in cast(list[Any], respond)],
        restart=[ToolRequestPart.from_json(p) for p in cast(list[Any], restart)],
    )


def delegation_of(part: Part) -> Pause | None:
    """Where the sub-agent of a paused delegation call paused (collapsed: in its interrupt data), or ``None``."""
    if part.kind != "tool_request" or not part.is_interrupt:
        return None
    data = part.meta(md.INTERRUPT)
    record = cast(dict[str, Any], data).get(md.DELEGATED) if isinstance(data, dict) else None
    return Pause.from_json(cast(dict[str, Any], record)) if isinstance(record, dict) else None


def surfaced_ref(call: ToolRequestPart, ref: str | None) -> str:
    """The ref a sub-agent's interrupt ``ref`` gets in the message of ``call``: unique there."""
    return f"{call.ref or call.name}/{ref or ''}"


def _surface(call: ToolRequestPart, pause: Pause) -> list[ToolRequestPart]:
    agent = pause.agent
    surfaced: list[ToolRequestPart] = []
    for sub in pause.interrupts:
        meta = {k: v for k, v in (sub.metadata or {}).items() if k != md.RESUME_TOKEN}
        meta[md.AGENT_PATH] = [agent, *md.agent_path(sub)]
        meta[md.SURFACED_FROM] = {"name": call.name, "ref": call.ref}
        surfaced.append(replace(sub, ref=surfaced_ref(call, sub.ref), metadata=meta))
    return surfaced


def expand(messages: list[Message]) -> list[Message]:
    """``messages`` with the paused last message expanded: each paused delegation's interrupts surfaced."""
    last = messages[-1] if messages else None
    if last is None or last.role != "model" or not any(delegation_of(p) for p in last.content):
        return messages
    content: list[Part] = []
    for part in last.content:
        pause = delegation_of(part)
        if pause is None or not isinstance(part, ToolRequestPart):
            content.append(part)
            continue
        content.append(with_metadata(part, drop=(md.INTERRUPT, md.DEADLINE), **{md.DELEGATED: pause.to_json()}))
        content += _surface(part, pause)
    return [*messages[:-1], Message(role=last.role, content=content, metadata=last.metadata, extra=last.extra)]


def collapse(history: list[Message], plan: ResumePlan, tools: Mapping[str, Tool[Any, Any, Any]]) -> ResumePlan:
    """Put ``history``'s expanded paused message back in the tool loop's form; the plan, carried over to it.

    The answers to each call's surfaced interrupts become one planned restart of that call.
    ``history`` (the tool loop's own list) gets the collapsed message.
    """
    last = history[-1] if history else None
    if last is None or last.role != "model" or not any(p.meta(md.DELEGATED) for p in last.content):
        return plan
    content: list[Part] = []
    moved: dict[int, int] = {}
    for i, part in enumerate(last.content):
        if md.surfaced_from(part) is not None:
            continue
        record = part.meta(md.DELEGATED) if isinstance(part, ToolRequestPart) else None
        if isinstance(record, dict):
            part = with_metadata(part, drop=(md.DELEGATED,), **{md.INTERRUPT: {md.DELEGATED: record}})
        moved[i] = len(content)
        content.append(part)
    calls: list[PlannedCall] = []
    forwarded: dict[int, list[PlannedCall]] = {}
    for c in plan.calls:
        src = md.surfaced_from(c.request)
        if src is None:
            calls.append(replace(c, index=moved[c.index], request=cast(ToolRequestPart, content[moved[c.index]])))
            continue
        forwarded.setdefault(_call_index(content, src, c.request), []).append(c)
    for index, answers in forwarded.items():
        calls.append(_restart(index, cast(ToolRequestPart, content[index]), answers, tools))
    history[-1] = Message(role=last.role, content=content, metadata=last.metadata, extra=last.extra)
    return ResumePlan(resume=plan.resume, calls=tuple(sorted(calls, key=lambda c: c.index)), schemas_checked=True)


def _call_index(content: list[Part], src: Mapping[str, Any], surfaced: ToolRequestPart) -> int:
    for i, part in enumerate(content):
        if isinstance(part, ToolRequestPart) and (part.name, part.ref) == (src.get("name"), src.get("ref")):
            if delegation_of(part) is not None:
                return i
    raise ResumeError(f"surfaced interrupt {surfaced.name!r} (ref: {surfaced.ref}) names no paused delegation call")


def _restart(
    index: int, call: ToolRequestPart, answers: list[PlannedCall], tools: Mapping[str, Tool[Any, Any, Any]]
) -> PlannedCall:
    """One planned restart of ``call``, carrying the answers to its surfaced interrupts to its sub-agent."""
    pause = delegation_of(call)
    assert pause is not None  # _call_index found it
    originals = {surfaced_ref(call, p.ref): p for p in pause.interrupts}
    respond: list[dict[str, Any]] = []
    restart: list[dict[str, Any]] = []
    for c in answers:
        original = originals.get(c.request.ref or "")
        if original is None:
            raise ResumeError(f"surfaced interrupt {c.request.name!r} (ref: {c.request.ref}) is not its sub-agent's")
        entry: ToolRequestPart | ToolResponsePart | None = c.response if c.verb == "respond" else c.restart
        assert entry is not None
        (respond if c.verb == "respond" else restart).append(_down(entry, original).to_json())
    resumed = {"delegation": pause.to_json(), "resume": {"respond": respond, "restart": restart}}
    entry = ToolRequestPart(name=call.name, ref=call.ref, input=call.input, metadata={md.RESUMED: resumed})
    tool = tools.get(call.name)
    return PlannedCall(
        index=index,
        request=call,
        verb="restart",
        restart=entry,
        value=call.input if tool is None else tool.validate_input(call.input),
        payload=resumed if tool is None else tool.validate_resume(resumed),
        original_input=call.input,
    )


def _down(entry: ToolRequestPart | ToolResponsePart, original: ToolRequestPart) -> ToolRequestPart | ToolResponsePart:
    """A resume entry as the sub-agent must get it: its own ref, and its own resume token (if any)."""
    meta = {k: v for k, v in (entry.metadata or {}).items() if k != md.RESUME_TOKEN}
    token = md.resume_token(original)
    if token is not None:
        meta[md.RESUME_TOKEN] = token
    return replace(entry, ref=original.ref, metadata=meta or None)
