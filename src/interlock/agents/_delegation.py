"""Delegation to sub-agents, whose interrupts reach the person as if the delegating agent had paused.

:func:`delegate` makes one tool per sub-agent, named as Genkit's delegation middleware names
them (``delegate_to_<agent>``), with input ``{task}`` and output ``{response, artifacts?}``::

    orchestrator = PromptAgent("orchestrator", model, tools=[*delegate(agents=[banker, remote_ops])], store=store)

A sub-agent may be local or a :class:`~interlock.http.RemoteAgent`, server- or
client-managed. Its artifacts are merged into the delegating session as
``"<invocationId>/<name>"`` (the invocation id is the sub-agent's session id), with
``metadata.source`` and ``metadata.invocationId``, and returned inline in the tool output.

When the sub-agent's turn pauses, so does the delegating turn: its interrupts are surfaced in
the delegating agent's output, stream and snapshot (:mod:`interlock._engine.surfacing`), and
answering them there resumes the sub-agent's paused turn first, then the delegation call with
the sub-agent's result, then the model. A sub-agent that fails, ends aborted, or would exceed
``max_delegations`` gives the model a tool result saying so, as Genkit does; a sub-agent that
refuses a resume (a bad answer, a spent claim or token) fails the resumed turn with its status,
so nothing is committed and the interrupts stay answerable.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any, Literal, Protocol, cast, runtime_checkable
from weakref import WeakKeyDictionary

from pydantic import BaseModel, Field

from .. import metadata as md
from .._engine.io import AgentError, AgentOutput
from .._engine.surfacing import Pause, forwarded
from .._wire import state_from_json, state_to_json
from ..errors import InterlockError, UsageError
from ..interrupts._plan import Resume
from ..messages import Message
from ..parts import TextPart, ToolRequestPart
from ..records._sessions import Artifact, ErrorInfo, Session, SessionState, Snapshot
from ..tools._signature import read_signature
from ..tools._tool import Tool, ToolContext

REFUSALS = frozenset({"INVALID_ARGUMENT", "PERMISSION_DENIED", "ABORTED", "FAILED_PRECONDITION", "UNAUTHENTICATED"})
"""Statuses of a sub-agent refusing a resume before it ran anything, that another answer (or a later one) may pass.

The resumed turn fails with them and commits nothing. Any other failure (a paused snapshot no
longer found, say) is the delegation's result: ``"Error calling agent ..."``.
"""


class SubAgentTurn(Protocol):
    """A connection to a sub-agent (a local or a remote one): one turn is sent, its output awaited."""

    async def send(self, value: str | None = None, *, resume: Resume | None = None) -> None: ...
    async def close(self) -> None: ...
    async def output(self) -> AgentOutput: ...
    def cancel(self) -> None: ...


class SubAgent(Protocol):
    """What delegation needs of a sub-agent (an :class:`~interlock.Agent` or a :class:`~interlock.RemoteAgent`)."""

    name: str

    @property
    def state_management(self) -> Literal["server", "client"]: ...

    def connect(
        self,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
    ) -> SubAgentTurn: ...

    async def get_snapshot(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> Snapshot: ...


@runtime_checkable
class AsksQuestions(Protocol):
    """A sub-agent whose surfaced interrupts are answered by tools it gives (a remote A2A agent's questions).

    ``question(part)`` is the tool that answers ``part`` (its schemas check an answer before
    anything is claimed or sent, and the inbox renders them), or ``None`` when it is not one of
    its questions. A local sub-agent's interrupts are answered by its own tools instead.
    """

    def question(self, part: ToolRequestPart) -> Tool[Any, Any, Any] | None: ...


async def _turn(
    agent: SubAgent,
    task: str | None = None,
    *,
    resume: Resume | None = None,
    snapshot_id: str | None = None,
    session_id: str | None = None,
    state: SessionState | None = None,
    context: dict[str, Any],
) -> AgentOutput:
    """One turn of the sub-agent (its output, failed or not); cancelling it stops the sub-agent's turn too.

    So an aborted or cancelled delegating turn gives back the sub-agent's claim and commits nothing there.
    """
    conn = agent.connect(snapshot_id=snapshot_id, session_id=session_id, state=state, context=context)
    await conn.send(task, resume=resume)
    await conn.close()
    try:
        return await conn.output()
    except asyncio.CancelledError:
        conn.cancel()
        raise


class DelegationTask(BaseModel):
    """A delegation tool's input: what the sub-agent should do."""

    task: str = Field(description="The task for the sub-agent, with everything it needs to know.")


class DelegatedArtifact(BaseModel):
    """An artifact the sub-agent produced, as merged into the delegating session."""

    name: str
    content: str | None = None


class Delegation(BaseModel):
    """A delegation tool's output: the sub-agent's reply (or why there is none) and its artifacts."""

    response: str
    artifacts: list[DelegatedArtifact] | None = None


class _DelegationTool(Tool[DelegationTask, Delegation, dict[str, Any]]):
    """A delegation tool: a question its sub-agent asked is answered by the sub-agent's tool for it."""

    def question(self, part: ToolRequestPart) -> Tool[Any, Any, Any] | None:
        agent = _SUB_AGENTS.get(self)
        return agent.question(part) if isinstance(agent, AsksQuestions) else None


class _Limit:
    """At most ``limit`` delegations per turn of a delegating session (``None``: no limit)."""

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 0:
            raise UsageError(f"max_delegations must be None or at least 0, not {limit!r}")
        self.limit = limit
        self._used: WeakKeyDictionary[Session, tuple[int, int]] = WeakKeyDictionary()

    def take(self, session: Session | None) -> bool:
        """Count one delegation of the running turn; ``False`` when the limit is reached."""
        if self.limit is None or session is None:
            return True
        turn = len(session.messages)  # constant during a turn: the tool loop works on its own copy
        seen, used = self._used.get(session, (turn, 0))
        used = used if seen == turn else 0
        if used >= self.limit:
            return False
        self._used[session] = (turn, used + 1)
        return True


def delegate(
    agents: Sequence[SubAgent],
    *,
    tool_prefix: str = "delegate_to",
    history_length: int = 0,
    max_delegations: int | None = None,
) -> list[Tool[DelegationTask, Delegation, dict[str, Any]]]:
    """One delegation tool per sub-agent, named ``<tool_prefix>_<agent name>``, for a :class:`~interlock.PromptAgent`.

    Args:
        agents: the sub-agents, local or remote.
        tool_prefix: the tools' name prefix (Genkit's default, ``delegate_to``).
        history_length: for a client-managed sub-agent, how many of the delegating session's
            last user and model text messages it starts from (server-managed sub-agents get
            only the task, as in Genkit).
        max_delegations: the most delegations one turn of a delegating session may start; the
            next ones get ``"Delegation limit reached (N) ..."`` as their result.
    """
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        raise UsageError(f"delegate() got two sub-agents with one name: {names}")
    if history_length < 0:
        raise UsageError(f"history_length must be at least 0, not {history_length!r}")
    limit = _Limit(max_delegations)
    return [_tool(agent, f"{tool_prefix}_{agent.name}", history_length, limit) for agent in agents]


def _tool(
    agent: SubAgent, name: str, history_length: int, limit: _Limit
) -> Tool[DelegationTask, Delegation, dict[str, Any]]:
    about: Any = getattr(agent, "description", "")
    description = f"Delegate a task to the sub-agent {agent.name!r}" + (f": {about}" if about else ".")

    async def run(task: DelegationTask, ctx: ToolContext[Any], resumed: dict[str, Any] | None) -> Delegation:
        if resumed is not None:
            return _result(agent, await _continue(agent, resumed, ctx), ctx)
        if not limit.take(ctx.session):
            return Delegation(response=f"Delegation limit reached ({limit.limit}); do the rest of the task yourself.")
        session_id = _session_for(agent, ctx)
        if session_id is not None and ctx.attempt > 1 and (earlier := await _outcome(agent, session_id, ctx)):
            return _result(agent, earlier, ctx)  # an earlier attempt's sub-agent turn committed: not run again
        state = None
        if agent.state_management == "client" and history_length and ctx.session is not None:
            state = SessionState(messages=_recent(ctx.session.messages, history_length))
        try:
            out = await _turn(agent, task.task, session_id=session_id, state=state, context=_context(ctx))
        except InterlockError as exc:
            return _failed(agent, exc.message)
        return _result(agent, out, ctx)

    # A server-managed sub-agent's turn is found again by its session, so running the call again is safe.
    made = _DelegationTool(
        run,
        name=name,
        description=description,
        input_type=DelegationTask,
        output_type=Delegation,
        resume_type=dict[str, Any],
        signature=read_signature(run),
        idempotent=agent.state_management == "server",
    )
    _SUB_AGENTS[made] = agent
    return made


_SUB_AGENTS: WeakKeyDictionary[Tool[Any, Any, Any], SubAgent] = WeakKeyDictionary()
"""The sub-agent of each delegation tool."""


def tool_for(agent: object, part: ToolRequestPart) -> Tool[Any, Any, Any] | None:
    """The tool that paused ``part``: ``agent``'s own, or, for a surfaced interrupt, its sub-agent's down the path.

    A sub-agent that :class:`AsksQuestions` gives the tool of its own question. ``None`` when
    an agent on the way is not a local agent with tools (a Genkit remote one, say).
    """
    current: object = agent
    for name in md.agent_path(part):
        tools: Sequence[Tool[Any, Any, Any]] = getattr(current, "tools", ())
        asker = next((t for t in tools if t.name == name), None)
        question = None if asker is None else asker.question(part)
        if question is not None:  # a question the call of one of its tools asked (an MCP tool's)
            return question
        subs = [_SUB_AGENTS[t] for t in tools if t in _SUB_AGENTS]
        current = next((a for a in subs if a.name == name), None)
        if current is None:
            return None
    if isinstance(current, AsksQuestions):
        return current.question(part)
    tools = getattr(current, "tools", ())
    return next((t for t in tools if t.name == part.name), None)


def _session_for(agent: SubAgent, ctx: ToolContext[Any]) -> str | None:
    """The sub-agent session of this call (server-managed, journaled): the same on every attempt of the call."""
    if agent.state_management != "server" or ctx.idempotency_key is None:
        return None
    return str(uuid.uuid5(_SESSIONS, f"{agent.name}\n{ctx.idempotency_key}"))


_SESSIONS = uuid.UUID("6f1d0c44-5b0e-4d53-9a43-0d6f2c1e7a19")
"""The namespace of the sub-agent session ids derived from delegation calls' idempotency keys."""


async def _outcome(agent: SubAgent, session_id: str, ctx: ToolContext[Any]) -> AgentOutput | None:
    """What the sub-agent session's committed turn ended with, or ``None`` when it has none."""
    try:
        return _output_of(await agent.get_snapshot(session_id=session_id, context=_context(ctx)))
    except InterlockError:  # no such session yet (NOT_FOUND): the earlier attempt never committed
        return None


def _output_of(snap: Snapshot) -> AgentOutput | None:
    if snap.status != "completed" or snap.state is None:
        return None
    messages = snap.state.messages
    return AgentOutput(
        session_id=snap.session_id,
        snapshot_id=snap.snapshot_id,
        message=messages[-1] if messages else None,
        artifacts=list(snap.state.artifacts),
        finish_reason=snap.finish_reason,
    )


async def _continue(agent: SubAgent, resumed: dict[str, Any], ctx: ToolContext[Any]) -> AgentOutput:
    """Resume the sub-agent's paused turn with the answers surfaced to the delegating agent."""
    pause, resume = forwarded(resumed)
    state = state_from_json(pause.state) if pause.state is not None else None
    try:
        out = await _turn(agent, resume=resume, snapshot_id=pause.snapshot_id, state=state, context=_context(ctx))
    except InterlockError as exc:
        error = ErrorInfo(status=exc.status, message=exc.message, details=exc.details)
        out = AgentOutput(session_id=pause.session_id, finish_reason="failed", error=error)
    if out.error is None or out.error.status not in REFUSALS:
        return out
    answered = await _answered(agent, out.error, ctx)
    if answered is None:
        raise AgentError.of(out)  # refused before it ran: the resumed turn fails, and commits nothing
    return answered


async def _answered(agent: SubAgent, error: ErrorInfo, ctx: ToolContext[Any]) -> AgentOutput | None:
    """The outcome of the turn that already answered the sub-agent's interrupt (the refusal names it), if committed.

    So a delegation call run again (after a crash, or once the sub-agent was answered
    directly) continues with the answer that reached the sub-agent first, and runs nothing.
    """
    details: Any = error.details
    winner = cast(dict[str, Any], details).get("winner") if isinstance(details, dict) else None
    if error.status != "ABORTED" or not isinstance(winner, str):
        return None
    try:
        return _output_of(await agent.get_snapshot(winner, context=_context(ctx)))
    except InterlockError:
        return None


def _context(ctx: ToolContext[Any]) -> dict[str, Any]:
    """The sub-agent's context: the caller's (identity, tenant), and which session delegated it."""
    by = {"sessionId": ctx.session.session_id} if ctx.session is not None else {}
    return {**ctx.context, md.DELEGATED_BY: by}


def _result(agent: SubAgent, out: AgentOutput, ctx: ToolContext[Any]) -> Delegation:
    """The delegation's output; a paused sub-agent pauses the delegation call, carrying where it paused."""
    if out.finish_reason == "interrupted" and out.interrupts:
        pause = Pause(
            agent=agent.name,
            session_id=out.session_id,
            snapshot_id=out.snapshot_id,
            state=state_to_json(out.state) if out.state is not None and out.snapshot_id is None else None,
            interrupts=tuple(out.interrupts),
        )
        ctx.interrupt(pause.interrupt_data())
    if out.error is not None:
        return _failed(agent, out.error.message)
    if out.finish_reason == "failed":
        return _failed(agent, out.text or "the sub-agent failed")
    if out.finish_reason == "aborted":
        return Delegation(response=f"Sub-agent {agent.name!r} was aborted before it finished the task.")
    return Delegation(response=out.text, artifacts=_merge(agent, out, ctx.session) or None)


def _failed(agent: SubAgent, message: str) -> Delegation:
    return Delegation(response=f"Error calling agent {agent.name!r}: {message}")


def _merge(agent: SubAgent, out: AgentOutput, session: Session | None) -> list[DelegatedArtifact]:
    """Merge the sub-agent's artifacts into the delegating session as ``<invocationId>/<name>``."""
    invocation = out.session_id or out.snapshot_id or agent.name
    merged: list[DelegatedArtifact] = []
    for i, artifact in enumerate(out.artifacts):
        name = f"{invocation}/{artifact.name if artifact.name is not None else i}"
        meta = {**(artifact.metadata or {}), "source": agent.name, "invocationId": invocation}
        if session is not None:
            session.add_artifacts(Artifact(name=name, parts=list(artifact.parts), metadata=meta))
        text = "".join(p.text for p in artifact.parts if isinstance(p, TextPart))
        merged.append(DelegatedArtifact(name=name, content=text or None))
    return merged


def _recent(messages: list[Message], count: int) -> list[Message]:
    """The last ``count`` user and model messages, text parts only (Genkit's history for a sub-agent)."""
    kept: list[Message] = []
    for message in messages:
        if message.role not in ("user", "model"):
            continue
        text = [p for p in message.content if isinstance(p, TextPart)]
        if text:
            kept.append(Message(role=message.role, content=list(text)))
    return kept[-count:]
