"""Agents: prompt agents (model + instructions + tools) and custom agents (your function).

Both share one interface: :meth:`Agent.connect` opens a connection (send messages and
resumes, iterate stream chunks, take the output), :meth:`Agent.run` does one input, and
:meth:`Agent.get_snapshot`, :meth:`Agent.abort` and :meth:`Agent.wait` work on stored
snapshots. The remote client (:mod:`interlock.http.client`) has the same interface over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from .agent_interface import AgentAPI
from .agent_io import (
    AgentInit,
    AgentInput,
    AgentResult,
    StreamChunk,
    TurnContext,
    TurnResult,
)
from .connection import END, BaseConnection
from .errors import InvalidArgumentError, SnapshotNotFoundError, UsageError
from .generate import ToolErrors, check_resume, generate
from .interrupts import Resume, ResumePlan, plan_resume
from .messages import Message
from .models import Model
from .parts import ToolRequestPart
from .records.snapshots import abort_pending, release_claim
from .runtime import DetachTarget, Invocation, SessionRunner
from .sessions import SessionState, Snapshot, utcnow
from .signing import Keyring
from .stores import SessionStore, Updater
from .tokens import TokenDecision, TokenSigner
from .tools import Tool, ToolMiddleware

__all__ = ["Agent", "AgentConnection", "CustomAgent", "PromptAgent", "StateTransform", "ChunkTransform"]

_log = logging.getLogger("interlock.workers")

StateTransform = Callable[[SessionState], SessionState]
"""Egress-only: rewrites state before it leaves the agent (outputs, snapshots read through the agent)."""
ChunkTransform = Callable[[StreamChunk], StreamChunk | None]
"""Egress-only: rewrites (or drops, by returning ``None``) each stream chunk."""


class AgentConnection(BaseConnection):
    """A live invocation: send inputs, iterate stream chunks, then take the output.

    ::

        async with agent.connect(snapshot_id=snap) as conn:
            await conn.send("hello")
            await conn.close()
            async for chunk in conn:
                ...
            output = await conn.output()
    """

    def __init__(self, invocation: Invocation) -> None:
        super().__init__(invocation.chunks, invocation.output)
        self._inv = invocation

    def _put(self, input: AgentInput) -> None:
        self._inv.inputs.put_nowait(input)

    def _end_inputs(self) -> None:
        self._inv.inputs.put_nowait(END)

    def cancel(self) -> None:
        """Stop an attached invocation now (a detached one runs on)."""
        if self._inv.detached_id is None:
            self._inv.main.cancel()


class Agent(AgentAPI):
    """Base of prompt and custom agents: state management, snapshots, detach and abort.

    Args:
        name: the agent's name (its URL path when served over HTTP).
        store: a session store makes the agent server-managed (outputs carry a snapshot
            id); without one it is client-managed (outputs carry the state).
        state_transform: egress-only rewrite of state that leaves the agent.
        chunk_transform: egress-only rewrite (or drop) of each stream chunk.
        heartbeat_interval: seconds between heartbeats of a detached turn.
        claim_ttl: seconds a resume's claim on an interrupted snapshot lasts without refresh
            (a crashed resumer's claim expires after this).
        state_signing: for a client-managed agent, sign the state it hands out and refuse
            state it did not sign (:class:`interlock.signing.Keyring`). Without it the
            caller controls client-managed state entirely.
        resume_tokens: for a server-managed agent, mint a signed, single-use, expiring
            token into every pending interrupt (:class:`interlock.tokens.TokenSigner`);
            tokens that come back are checked.
        require_resume_tokens: refuse (PERMISSION_DENIED) every resume entry without a
            valid token for the interrupt it answers.
        spent_tokens: for a client-managed agent with ``state_signing``, a store where each
            paused state's resume is spent, so the same state sent back twice is refused
            (PERMISSION_DENIED, ``replayed``; :mod:`interlock.replay`). Without it a signed
            state can be replayed: each copy runs the resume again.
        notify: for a server-managed agent, write webhook events (``interrupt.created``,
            ``interrupt.answered``, ...; :mod:`interlock.notifications`) to the store's outbox
            in the same transaction as each turn's snapshot; :mod:`interlock.webhooks` delivers them.
        detach_to: where detached turns run (:class:`interlock.workers.WorkerQueue`: ``interlock
            worker`` processes); without it they run in this process. A detach sent while a turn
            already runs here keeps that turn here.
    """

    allow_replaced_input: bool = False
    """Accept restarts with revised inputs (prompt agents take it as an argument)."""

    def __init__(
        self,
        name: str,
        *,
        store: SessionStore | None = None,
        description: str = "",
        state_transform: StateTransform | None = None,
        chunk_transform: ChunkTransform | None = None,
        heartbeat_interval: float = 30.0,
        claim_ttl: float = 60.0,
        state_signing: Keyring | None = None,
        resume_tokens: TokenSigner | None = None,
        require_resume_tokens: bool = False,
        spent_tokens: SessionStore | None = None,
        notify: bool = False,
        detach_to: DetachTarget | None = None,
    ) -> None:
        if not name:
            raise UsageError("an agent needs a non-empty name")
        self.name = name
        self.store = store
        self.description = description
        self.state_transform = state_transform
        self.chunk_transform = chunk_transform
        self.heartbeat_interval = heartbeat_interval
        self.claim_ttl = claim_ttl
        if state_signing is not None and store is not None:
            raise UsageError("state_signing is for client-managed agents (no store); a store keeps the state itself")
        self.state_signing = state_signing
        if resume_tokens is not None and store is None:
            raise UsageError("resume_tokens are for server-managed agents: a token binds a stored snapshot")
        if require_resume_tokens and resume_tokens is None:
            raise UsageError("require_resume_tokens needs resume_tokens=TokenSigner(...) to mint and check them")
        self.resume_tokens = resume_tokens
        self.require_resume_tokens = require_resume_tokens
        if spent_tokens is not None and (store is not None or state_signing is None):
            raise UsageError(
                "spent_tokens is for client-managed agents with state_signing (a server-managed agent spends "
                "resume tokens in its own store; unsigned state can be altered to look unspent)"
            )
        self.spent_tokens = spent_tokens
        if notify and store is None:
            raise UsageError("notify=True needs a store: webhook events are written to the store's outbox")
        self.notify = notify
        if detach_to is not None and store is None:
            raise UsageError("detach_to needs a store: the worker reads the detached turn from the store")
        self.detach_to = detach_to

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def state_management(self) -> Literal["server", "client"]:
        return "server" if self.store is not None else "client"

    # hooks for subclasses ------------------------------------------------------------------

    async def invoke(self, runner: SessionRunner) -> AgentResult | None:
        """Drive the invocation (custom agents run their function here)."""
        raise NotImplementedError

    def check_resume(self, resume: Resume, history: list[Message]) -> ResumePlan:
        """Refuse a resume that does not fit the history, before anything runs or is claimed.

        Returns the validated plan (given to the turn handler as ``ctx.plan``).
        """
        return plan_resume(resume, history)

    def token_decisions(self, part: ToolRequestPart) -> tuple[TokenDecision, ...]:
        """The decisions a resume token minted for the interrupt ``part`` allows (override to narrow).

        Respond and restart; edit (a revised input) too when the agent allows revised inputs.
        """
        return ("respond", "restart", "edit") if self.allow_replaced_input else ("respond", "restart")

    # egress transforms ---------------------------------------------------------------------

    def transform_state(self, state: SessionState) -> SessionState:
        return self.state_transform(state) if self.state_transform else state

    def custom_transform(self, custom: object) -> Any:
        if self.state_transform is None:
            return custom
        return self.state_transform(SessionState(custom=custom)).custom

    def transform_chunk(self, chunk: StreamChunk) -> StreamChunk | None:
        return self.chunk_transform(chunk) if self.chunk_transform else chunk

    # the interface ------------------------------------------------------------------------

    def connect(
        self,
        *,
        snapshot_id: str | None = None,
        session_id: str | None = None,
        state: SessionState | None = None,
        context: dict[str, Any] | None = None,
    ) -> AgentConnection:
        """Open an invocation; the session comes from a snapshot, a session id, state, or is new."""
        init = AgentInit(snapshot_id=snapshot_id, session_id=session_id, state=state)
        return AgentConnection(Invocation(self, init, context))

    def _require_store(self) -> SessionStore:
        if self.store is None:
            raise UsageError(f"agent {self.name!r} has no session store; snapshots need a server-managed agent")
        return self.store

    async def get_snapshot(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> Snapshot:
        """A stored snapshot by id, or a session's latest.

        With both ids the snapshot must belong to the session. The status reads as
        ``expired`` for a pending snapshot whose heartbeat stopped; the state transform applies.

        Raises:
            SnapshotNotFoundError: no such snapshot or session (NOT_FOUND), in this tenant,
                for this agent.
        """
        store = self._require_store()
        tenant = (context or {}).get("tenant")
        if snapshot_id:
            snap = await store.load(snapshot_id, tenant=tenant)
            if snap is not None and session_id and snap.session_id != session_id:
                snap = None
        elif session_id:
            snap = await store.latest(session_id, tenant=tenant)
        else:
            raise InvalidArgumentError("get_snapshot needs a snapshot_id or a session_id")
        if snap is None or not snap.belongs_to(self.name):
            what = f"Snapshot {snapshot_id!r}" if snapshot_id else f"Session {session_id!r}"
            raise SnapshotNotFoundError(f"{what} not found for agent {self.name!r}")
        state = self.transform_state(snap.state) if snap.state is not None else None
        return snap.evolve(status=snap.read_status(), state=state)

    async def changed(
        self,
        snap: Snapshot,
        *,
        timeout: float | None = None,
        interval: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        """Return once the store reports another status for ``snap`` (no polling interval), or after ``timeout``.

        A pending snapshot whose heartbeat stops reads as ``expired`` without a write, so
        the wait also ends when its heartbeat would be stale. ``interval`` is not used.
        """
        store = self._require_store()
        if (stale := snap.stale_at) is not None:
            left = max((stale - utcnow()).total_seconds(), 0.0)
            timeout = left if timeout is None else min(timeout, left)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                async for status in store.watch(snap.snapshot_id, tenant=(context or {}).get("tenant")):
                    if status != snap.status:
                        return

    async def abort(self, snapshot_id: str, *, context: dict[str, Any] | None = None) -> str | None:
        """Abort a detached turn: flips ``pending`` to ``aborted``; returns the status before, or ``None``.

        In the same write, a resumed turn's claim on the interrupt it answers is given back,
        so the interrupt can be answered again whatever the aborted run does next.
        """
        store = self._require_store()
        tenant = (context or {}).get("tenant")
        snap = await store.load(snapshot_id, tenant=tenant)
        if snap is None or not snap.belongs_to(self.name):
            return None
        if snap.status != "pending":
            return snap.status
        writes: list[tuple[str, Updater]] = [(snapshot_id, abort_pending())]
        if snap.parent_id:
            writes.append((snap.parent_id, release_claim(snapshot_id)))
        flipped = (await store.save_all(writes, tenant=tenant))[0]
        if flipped is not None:
            await self._abort_job(snapshot_id, tenant)
            return "pending"
        now = await store.load(snapshot_id, tenant=tenant)
        return None if now is None else now.status

    async def _abort_job(self, snapshot_id: str, tenant: str | None) -> None:
        """Cancel the flipped turn's job on whatever worker runs it (its own abort watch would stop it too)."""
        if self.detach_to is None:
            return
        try:
            await self.detach_to.abort(snapshot_id, tenant)
        except Exception as exc:  # the snapshot is aborted already; the worker's watch of it cancels the run
            _log.warning("abort of snapshot %s: the worker queue was not told (%s)", snapshot_id, exc)


CustomAgentFn = Callable[[SessionRunner], Awaitable[AgentResult | None]]


class CustomAgent(Agent):
    """An agent driven by your async function, which runs turns through a :class:`SessionRunner`."""

    def __init__(
        self,
        name: str,
        fn: CustomAgentFn,
        *,
        store: SessionStore | None = None,
        description: str = "",
        state_transform: StateTransform | None = None,
        chunk_transform: ChunkTransform | None = None,
        heartbeat_interval: float = 30.0,
        claim_ttl: float = 60.0,
        state_signing: Keyring | None = None,
        resume_tokens: TokenSigner | None = None,
        require_resume_tokens: bool = False,
        spent_tokens: SessionStore | None = None,
        notify: bool = False,
        detach_to: DetachTarget | None = None,
    ) -> None:
        super().__init__(
            name,
            store=store,
            description=description,
            state_transform=state_transform,
            chunk_transform=chunk_transform,
            heartbeat_interval=heartbeat_interval,
            claim_ttl=claim_ttl,
            state_signing=state_signing,
            resume_tokens=resume_tokens,
            require_resume_tokens=require_resume_tokens,
            spent_tokens=spent_tokens,
            notify=notify,
            detach_to=detach_to,
        )
        self.fn = fn

    async def invoke(self, runner: SessionRunner) -> AgentResult | None:
        return await self.fn(runner)


class PromptAgent(Agent):
    """An agent made of a model, instructions and tools, running the tool loop each turn.

    Args:
        name: the agent's name.
        model: the model to call.
        instructions: the system prompt (not stored in the session history).
        tools: tools the model may call.
        config: model configuration.
        max_turns: tool-calling rounds per turn before the turn fails.
        middleware: tool middleware (e.g. :func:`interlock.tool_approval`).
        allow_replaced_input: accept restarts with revised inputs (unsafe for untrusted callers).
        tool_errors: ``"raise"`` fails the turn when a tool raises or the model names an
            unknown tool; ``"model"`` sends the error back to the model as the call's output
            (see :func:`interlock.generate.generate`).
        tool_input_errors: the same for a model input that fails a tool's schema
            (``None``: as ``tool_errors``).
        tool_retries: errors of one tool a turn sends back to the model before it fails.

    The other keyword arguments are :class:`Agent`'s.
    """

    def __init__(
        self,
        name: str,
        model: Model,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool[Any, Any, Any]] = (),
        config: dict[str, Any] | None = None,
        max_turns: int = 5,
        middleware: Sequence[ToolMiddleware] = (),
        allow_replaced_input: bool = False,
        tool_errors: ToolErrors = "raise",
        tool_input_errors: ToolErrors | None = None,
        tool_retries: int = 2,
        store: SessionStore | None = None,
        description: str = "",
        state_transform: StateTransform | None = None,
        chunk_transform: ChunkTransform | None = None,
        heartbeat_interval: float = 30.0,
        claim_ttl: float = 60.0,
        state_signing: Keyring | None = None,
        resume_tokens: TokenSigner | None = None,
        require_resume_tokens: bool = False,
        spent_tokens: SessionStore | None = None,
        notify: bool = False,
        detach_to: DetachTarget | None = None,
    ) -> None:
        super().__init__(
            name,
            store=store,
            description=description,
            state_transform=state_transform,
            chunk_transform=chunk_transform,
            heartbeat_interval=heartbeat_interval,
            claim_ttl=claim_ttl,
            state_signing=state_signing,
            resume_tokens=resume_tokens,
            require_resume_tokens=require_resume_tokens,
            spent_tokens=spent_tokens,
            notify=notify,
            detach_to=detach_to,
        )
        self.model = model
        self.instructions = instructions
        self.tools = list(tools)
        self.config = config
        self.max_turns = max_turns
        self.middleware = list(middleware)
        self.allow_replaced_input = allow_replaced_input
        self.tool_errors: ToolErrors = tool_errors
        self.tool_input_errors: ToolErrors | None = tool_input_errors
        self.tool_retries = tool_retries
        self._by_name = {t.name: t for t in self.tools}

    def check_resume(self, resume: Resume, history: list[Message]) -> ResumePlan:
        return check_resume(resume, history, self.tools, allow_replaced_input=self.allow_replaced_input)

    def token_decisions(self, part: ToolRequestPart) -> tuple[TokenDecision, ...]:
        """As :meth:`Agent.token_decisions`; a tool that never runs (``interrupt_tool``) is answered by respond only."""
        found = self._by_name.get(part.name)
        return ("respond",) if found is not None and found.is_interrupt_only else super().token_decisions(part)

    async def invoke(self, runner: SessionRunner) -> AgentResult | None:
        async def turn(input: AgentInput, ctx: TurnContext) -> TurnResult:
            session = runner.session
            # generate copies the history it is given, and set_messages the one it gets back: no other copy
            preamble = [Message.system(self.instructions)] if self.instructions else []
            result = await generate(
                self.model,
                [*preamble, *session.messages] if preamble else session.messages,
                tools=self.tools,
                resume=input.resume,
                plan=ctx.plan,
                config=self.config,
                max_turns=self.max_turns,
                on_chunk=runner.send_chunk,
                middleware=self.middleware,
                session=session,
                context=ctx.context,
                allow_replaced_input=self.allow_replaced_input,
                tool_errors=self.tool_errors,
                tool_input_errors=self.tool_input_errors,
                tool_retries=self.tool_retries,
                reclaimed_from=ctx.reclaimed_from,
                effects=ctx.effects,
            )
            session.set_messages(result.messages[len(preamble) :] if preamble else result.messages)
            return TurnResult(finish_reason=result.finish_reason)

        await runner.run(turn)
        return None
