"""The protocol seam: what a wire protocol's adapter may ask of the agents a process serves.

:class:`AgentService` is the interface: start a turn, resume a paused one with answers, read
a snapshot, wait for it to settle, abort it, list its pending interrupts. Its values are
the engine's own (:class:`~interlock._engine.io.AgentInput`, :class:`~interlock._engine.io.AgentInit`,
:class:`~interlock._engine.io.AgentOutput`, :class:`~interlock.records.Snapshot`,
:class:`~interlock.inbox.PendingInterrupt`, the inbox's answers); protocol JSON never
crosses it. Who calls is a :class:`Caller` the adapter builds from its own authentication
(the Genkit server's context provider); an adapter never reads a tenant off a request body.

:class:`ServedAgents` implements it over local agents. It adds no rule of its own beyond
the shape of a turn's start: validation, resume plans, fenced claims, resume tokens, the
effect journal and tenancy all happen where they always do (``Agent.connect``, the engine,
:class:`~interlock.inbox.Inbox`), so every protocol gets them once and the same.
An adapter translates; it never re-implements a rule.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, Protocol

from .. import metadata as md
from .._engine.io import AgentInit, AgentInput, AgentOutput, StreamChunk, as_input, send_checked
from ..agents._agent import Agent
from ..agents._interface import SETTLED
from ..errors import AbortedError, FailedPreconditionError, InvalidArgumentError, NotFoundError
from ..inbox._answers import Answer, Approve, Reject, Respond, entry, match_all
from ..inbox._inbox import Inbox, PendingInterrupt
from ..inbox._items import pending_item
from ..inbox._options import answer_options, answered
from ..interrupts._plan import Resume
from ..parts import ToolResponsePart
from ..records._interrupt_index import entries_of
from ..records._sessions import ErrorInfo, SessionState, Snapshot, check_state, utcnow
from ..tools._expiry import answers_close_at

_NOT_CONTEXT = ("identity", "tenant")


@dataclass(frozen=True, kw_only=True, slots=True)
class Caller:
    """Who asks: the identity an answer is recorded under, the tenant every read and write is scoped to.

    ``extra`` is the rest of the agent context (tools read it as ``ctx.context``). A protocol
    adapter builds it from what authenticated the request, never from the request's body.
    """

    identity: Any = None
    tenant: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict[str, Any])

    @classmethod
    def of(cls, context: Mapping[str, Any]) -> Caller:
        """The caller an agent context names (``identity`` and ``tenant`` keys; the rest is ``extra``)."""
        extra = {k: v for k, v in context.items() if k not in _NOT_CONTEXT}
        return cls(identity=context.get("identity"), tenant=context.get("tenant"), extra=extra)

    def context(self) -> dict[str, Any]:
        """The agent context: ``extra`` plus ``identity`` and ``tenant`` when set."""
        named = {"identity": self.identity, "tenant": self.tenant}
        return dict(self.extra) | {k: v for k, v in named.items() if v is not None}


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentInfo:
    """What a protocol advertises about a served agent (an MCP tool, an A2A card)."""

    name: str
    description: str
    state_management: Literal["server", "client"]


class RunningTurn(Protocol):
    """A started turn: its stream chunks, then its output; ``cancel`` stops an attached one."""

    def __aiter__(self) -> AsyncIterator[StreamChunk]: ...
    async def output(self) -> AgentOutput: ...
    def cancel(self) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Acceptance:
    """What a protocol's plain "here is the answer" (AG-UI ``resolved``, MCP ``accept``) means for one interrupt.

    ``respond`` for a call that only asks (the value is its output), else ``approve`` (the
    value is the resume payload); ``schema`` is the JSON Schema of the value (``None``: any
    JSON). A protocol's "no" (AG-UI ``cancelled``, MCP ``decline``) is :class:`Reject`.
    """

    decision: Literal["respond", "approve"]
    schema: dict[str, Any] | None

    def answer(self, value: Any) -> Answer:
        """The inbox answer carrying ``value``."""
        return Respond(value) if self.decision == "respond" else Approve(value)


def acceptance(answers: Mapping[str, Mapping[str, Any]]) -> Acceptance:
    """The :class:`Acceptance` of an interrupt, from the answers it takes (:meth:`AgentService.options`)."""
    if "approve" in answers:
        return Acceptance(decision="approve", schema=answers["approve"].get("payload_schema"))
    return Acceptance(decision="respond", schema=answers["respond"].get("output_schema"))


def expires_at(item: PendingInterrupt) -> datetime | None:
    """When ``item`` stops taking answers other than a rejection (its deadline, unless it escalates), or ``None``."""
    return answers_close_at(md.deadline_of(item.part))


def refuse_expired(snapshot_id: str, pairs: list[tuple[PendingInterrupt, Answer]], now: datetime) -> None:
    """FAILED_PRECONDITION when an answer other than :class:`Reject` reaches an interrupt past its deadline."""
    for item, answer in pairs:
        at = expires_at(item)
        if at is not None and at <= now and not isinstance(answer, Reject):
            raise FailedPreconditionError(
                f"interrupt {item.label} of snapshot {snapshot_id} expired at {at.isoformat()}; "
                "it can only be rejected (cancelled) now"
            )


class AgentService(Protocol):
    """The engine-facing interface every protocol adapter calls (see ``docs/architecture.md``).

    ``agent`` is the name the agent is served under. Unknown agents, snapshots of another
    agent and snapshots of another tenant are all NOT_FOUND.
    """

    def describe(self, agent: str) -> AgentInfo:
        """The served agent ``agent``; NOT_FOUND when there is none."""
        ...

    def names(self) -> list[str]:
        """The names of the served agents."""
        ...

    async def start(self, agent: str, input: AgentInput, init: AgentInit, *, caller: Caller) -> RunningTurn:
        """Start one turn: a message, a resume (``input.resume``, Genkit's respond/restart parts), or a detach."""
        ...

    async def resume(
        self,
        agent: str,
        snapshot_id: str,
        answers: Answer | Mapping[str, Answer],
        *,
        caller: Caller,
        tokens: Mapping[str, str] | None = None,
    ) -> RunningTurn:
        """Answer a paused snapshot's interrupts (one answer for all, or by ref) and start the resumed turn.

        Every interrupt needs an answer; one past its deadline takes only a rejection (FAILED_PRECONDITION).
        """
        ...

    def pending_in(self, agent: str, state: SessionState) -> list[PendingInterrupt]:
        """The interrupts a client-managed session waits on, read from its ``state`` (``[]`` for none)."""
        ...

    async def resume_state(
        self, agent: str, state: SessionState, answers: Answer | Mapping[str, Answer], *, caller: Caller
    ) -> RunningTurn:
        """:meth:`resume` for a client-managed agent: answer the interrupts its ``state`` waits on, start the turn.

        The same rules as :meth:`resume`; the engine checks the state (its signature, when the agent
        signs state) and the answers against its history, as for any client-managed resume.
        """
        ...

    async def read(
        self, agent: str, *, snapshot_id: str | None = None, session_id: str | None = None, caller: Caller
    ) -> Snapshot:
        """A snapshot by id, or a session's latest."""
        ...

    async def wait(
        self,
        agent: str,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        timeout: float,
        caller: Caller,
    ) -> Snapshot:
        """The snapshot once it settles (completed, failed, aborted, expired), or as it is after ``timeout``."""
        ...

    async def abort(self, agent: str, snapshot_id: str, *, caller: Caller) -> str | None:
        """Abort a detached turn; its status before, or ``None`` when there is no such snapshot."""
        ...

    async def pending(
        self, agent: str, *, snapshot_id: str | None = None, session_id: str | None = None, caller: Caller
    ) -> list[PendingInterrupt]:
        """The interrupts waiting for an answer in a snapshot, or in a session's latest; ``[]`` for none."""
        ...

    def options(self, agent: str, item: PendingInterrupt) -> dict[str, dict[str, Any]]:
        """The answers a pending interrupt takes, each with the JSON Schema of what it carries (``None``: any JSON).

        The inbox's own (:func:`~interlock.inbox._options.answer_options`): ``respond`` (its
        ``output_schema``), and unless the tool only asks, ``approve``/``reject``/``restart``
        (their ``payload_schema``: the tool's resume type) and ``edit``.
        """
        ...


class ServedAgents:
    """:class:`AgentService` over agents in this process, by served name (``agents`` is kept, not copied)."""

    def __init__(self, agents: dict[str, Agent]) -> None:
        self.agents = agents

    def describe(self, agent: str) -> AgentInfo:
        found = self._agent(agent)
        return AgentInfo(name=agent, description=found.description, state_management=found.state_management)

    def names(self) -> list[str]:
        return list(self.agents)

    async def start(self, agent: str, input: AgentInput, init: AgentInit, *, caller: Caller) -> RunningTurn:
        found = self._agent(agent)
        input = check_start(input, init)
        conn = found.connect(
            snapshot_id=init.snapshot_id, session_id=init.session_id, state=init.state, context=caller.context()
        )
        await send_checked(conn, input)
        await conn.close()
        return conn

    async def resume(
        self,
        agent: str,
        snapshot_id: str,
        answers: Answer | Mapping[str, Answer],
        *,
        caller: Caller,
        tokens: Mapping[str, str] | None = None,
    ) -> RunningTurn:
        """As :meth:`AgentService.resume`; an answer that lost is refused naming who answered first.

        Lost before the turn starts (the snapshot reads as claimed), it raises the
        :class:`~interlock.inbox._options.AnsweredError`; lost at the claim, the turn's output
        carries it (``ABORTED``, who and when in ``details``).
        """
        found = self._agent(agent)
        snap = await self.read(agent, snapshot_id=snapshot_id, caller=caller)  # this agent's, this tenant's
        inbox = Inbox(found.store, agents={found.name: found})
        try:
            items = await inbox.get(snap.snapshot_id, tenant=caller.tenant)
            refuse_expired(snap.snapshot_id, match_all(snap.snapshot_id, items, answers), utcnow())
            _, resume = await inbox.resume_for(snap.snapshot_id, answers, tenant=caller.tenant, tokens=tokens)
        except AbortedError as exc:
            raise await answered(inbox, snapshot_id, caller.tenant, exc) from None
        turn = await self.start(agent, AgentInput(resume=resume), AgentInit(snapshot_id=snapshot_id), caller=caller)
        return _Answering(turn, inbox, snapshot_id, caller.tenant)

    def pending_in(self, agent: str, state: SessionState) -> list[PendingInterrupt]:
        found = self._agent(agent)
        paused = Snapshot(
            snapshot_id="",
            session_id=state.session_id or "",
            finish_reason="interrupted",
            state=state,
            metadata={"agent": found.name},
        )
        now = utcnow()
        return [pending_item(e, now, None, found.name) for e in entries_of(paused)]

    async def resume_state(
        self, agent: str, state: SessionState, answers: Answer | Mapping[str, Answer], *, caller: Caller
    ) -> RunningTurn:
        found = self._agent(agent)
        items = self.pending_in(agent, state)
        where = f"of session {state.session_id or '(new)'}"
        if not items:
            raise FailedPreconditionError(f"the state {where} waits on no interrupt: its last turn did not pause")
        pairs = match_all(where, items, answers)
        refuse_expired(where, pairs, utcnow())
        entries = [entry(item, answer, found) for item, answer in pairs]
        resume = Resume(
            respond=[e for e in entries if isinstance(e, ToolResponsePart)],
            restart=[e for e in entries if not isinstance(e, ToolResponsePart)],
        )
        return await self.start(agent, AgentInput(resume=resume), AgentInit(state=state), caller=caller)

    async def read(
        self, agent: str, *, snapshot_id: str | None = None, session_id: str | None = None, caller: Caller
    ) -> Snapshot:
        return await self._agent(agent).get_snapshot(snapshot_id, session_id=session_id, context=caller.context())

    async def wait(
        self,
        agent: str,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        timeout: float,
        caller: Caller,
    ) -> Snapshot:
        """As :meth:`AgentService.wait`, woken by the store's watch, not a poll.

        :meth:`Agent.changed` (LISTEN/NOTIFY on PostgreSQL), so a commit by any process answers at once.
        """
        found, context = self._agent(agent), caller.context()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            snap = await found.get_snapshot(snapshot_id, session_id=session_id, context=context)
            left = deadline - loop.time()
            if snap.status in SETTLED or left <= 0:
                return snap
            await found.changed(snap, timeout=left, context=context)

    async def abort(self, agent: str, snapshot_id: str, *, caller: Caller) -> str | None:
        return await self._agent(agent).abort(snapshot_id, context=caller.context())

    async def pending(
        self, agent: str, *, snapshot_id: str | None = None, session_id: str | None = None, caller: Caller
    ) -> list[PendingInterrupt]:
        found = self._agent(agent)
        snap = await self.read(agent, snapshot_id=snapshot_id, session_id=session_id, caller=caller)
        inbox = Inbox(found.store, agents={found.name: found})
        items = await inbox.pending(agent=found.name, session_id=snap.session_id, tenant=caller.tenant)
        return [i for i in items if i.snapshot_id == snap.snapshot_id]

    def options(self, agent: str, item: PendingInterrupt) -> dict[str, dict[str, Any]]:
        found = self._agent(agent)
        return answer_options({found.name: found}, item)

    def _agent(self, name: str) -> Agent:
        found = self.agents.get(name)
        if found is None:
            raise NotFoundError(f"no agent named {name!r} is served here (served: {', '.join(self.agents) or 'none'})")
        return found


class _Answering:
    """A resumed turn whose lost claim (an ``ABORTED`` output) names who answered first."""

    def __init__(self, turn: RunningTurn, inbox: Inbox, snapshot_id: str, tenant: str | None) -> None:
        self._turn, self._inbox, self._snapshot_id, self._tenant = turn, inbox, snapshot_id, tenant

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        return aiter(self._turn)

    def cancel(self) -> None:
        self._turn.cancel()

    async def output(self) -> AgentOutput:
        try:
            out = await self._turn.output()
        except AbortedError as exc:
            raise await answered(self._inbox, self._snapshot_id, self._tenant, exc) from None
        if out.error is None or out.error.status != "ABORTED":
            return out
        lost = AbortedError(out.error.message, details=out.error.details)
        named = await answered(self._inbox, self._snapshot_id, self._tenant, lost)
        return replace(out, error=ErrorInfo(status=named.status, message=named.message, details=named.details))


def check_start(input: AgentInput, init: AgentInit) -> AgentInput:
    """The shape of a turn's start, refused (INVALID_ARGUMENT) before any agent work; the checked input."""
    if input.message is None and input.resume is None and not input.detach:
        raise InvalidArgumentError("the agent input needs a 'message', a 'resume' or 'detach'")
    if init.state is not None and (init.snapshot_id or init.session_id):
        raise InvalidArgumentError("init 'state' cannot be combined with 'snapshotId' or 'sessionId'")
    checked = as_input(input)  # the same input checks as a local call
    if init.state is not None:
        check_state(init.state, "init.state")
    return checked
