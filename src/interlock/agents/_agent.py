"""Agents: prompt agents (model + instructions + tools) and custom agents (your function).

Both share one interface: :meth:`Agent.connect` opens a connection (send messages and
resumes, iterate stream chunks, take the output), :meth:`Agent.run` does one input, and
:meth:`Agent.get_snapshot`, :meth:`Agent.abort` and :meth:`Agent.wait` work on stored
snapshots. The remote client (:mod:`interlock.http._client`) has the same interface over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from .._engine.invocation import Invocation, SessionRunner
from .._engine.io import END, AgentInit, AgentInput, AgentResult, BaseConnection, StreamChunk, TurnContext, TurnResult
from .._engine.loop import ToolErrorPolicy, ToolErrors, ToolLoop
from ..errors import InvalidArgumentError, SnapshotNotFoundError, UsageError
from ..interrupts._plan import Resume, ResumePlan, plan_resume
from ..interrupts._tokens import TokenDecision
from ..messages import Message
from ..models import Model
from ..parts import ToolRequestPart
from ..records._sessions import SessionState, Snapshot, utcnow
from ..records.snapshots import abort_pending, release_claim
from ..stores import SessionStore, Updater
from ..tools._tool import Tool, ToolMiddleware
from ._host import ChunkTransform as ChunkTransform
from ._host import Host
from ._host import StateTransform as StateTransform
from ._interface import AgentAPI

_log = logging.getLogger("interlock.workers")

_DEFAULT_HOST = Host()


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
        self._inv.put_input(input)

    def _end_inputs(self) -> None:
        self._inv.put_input(END)

    def _until_output(self) -> Awaitable[None]:
        return self._inv.until_output()

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
        description: what the agent does (shown to a model that delegates to it).
        host: the deployment settings (:class:`interlock.agents.Host`: claims, heartbeats,
            signed state, resume tokens, webhooks, workers, egress transforms), checked
            against ``store`` here.
    """

    allow_replaced_input: bool = False
    """Accept restarts with revised inputs (prompt agents take it as an argument)."""

    def __init__(
        self, name: str, *, store: SessionStore | None = None, description: str = "", host: Host | None = None
    ) -> None:
        if not name:
            raise UsageError("an agent needs a non-empty name")
        self.name = name
        self.store = store
        self.description = description
        self.host = _DEFAULT_HOST if host is None else host

    @property
    def host(self) -> Host:
        """The deployment settings; assigning a new :class:`~interlock.agents.Host` checks it against the store."""
        return self._host

    @host.setter
    def host(self, host: Host) -> None:
        host.check(self.store)
        self._host = host

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
        transform = self._host.state_transform
        return transform(state) if transform else state

    def custom_transform(self, custom: object) -> Any:
        transform = self._host.state_transform
        return custom if transform is None else transform(SessionState(custom=custom)).custom

    def transform_chunk(self, chunk: StreamChunk) -> StreamChunk | None:
        transform = self._host.chunk_transform
        return transform(chunk) if transform else chunk

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
        target = self._host.detach_to
        if target is None:
            return
        try:
            await target.abort(snapshot_id, tenant)
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
        host: Host | None = None,
    ) -> None:
        super().__init__(name, store=store, description=description, host=host)
        self.fn = fn

    async def invoke(self, runner: SessionRunner) -> AgentResult | None:
        return await self.fn(runner)


class PromptAgent(Agent):
    """An agent made of a model, instructions and tools, running its tool loop each turn.

    The tool loop (:class:`interlock._engine.loop.ToolLoop`) is built here, once; each turn gives
    it only the turn's history, resume plan, session and effect journal.

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
            unknown tool; ``"model"`` sends the error back to the model as the call's output.
            A :class:`interlock._engine.loop.ToolErrorPolicy` also sets the mode for a model input
            that fails a tool's schema, and how many errors of one tool a turn sends back.

    ``store``, ``description`` and ``host`` are :class:`Agent`'s.
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
        tool_errors: ToolErrors | ToolErrorPolicy = "raise",
        store: SessionStore | None = None,
        description: str = "",
        host: Host | None = None,
    ) -> None:
        super().__init__(name, store=store, description=description, host=host)
        self.instructions = instructions
        self.allow_replaced_input = allow_replaced_input
        self.loop = ToolLoop(
            model,
            tools=tools,
            config=config,
            max_turns=max_turns,
            middleware=middleware,
            allow_replaced_input=allow_replaced_input,
            tool_errors=tool_errors,
        )
        self._preamble = (Message.system(instructions),) if instructions else ()

    @property
    def model(self) -> Model:
        """The model the tool loop calls (assigning one takes effect from the next turn)."""
        return self.loop.model

    @model.setter
    def model(self, model: Model) -> None:
        self.loop.model = model

    @property
    def tools(self) -> tuple[Tool[Any, Any, Any], ...]:
        """The tools the model may call."""
        return self.loop.tools

    def check_resume(self, resume: Resume, history: list[Message]) -> ResumePlan:
        return self.loop.check_resume(resume, history)

    def token_decisions(self, part: ToolRequestPart) -> tuple[TokenDecision, ...]:
        """As :meth:`Agent.token_decisions`; a tool that never runs (``interrupt_tool``) is answered by respond only."""
        found = self.loop.by_name.get(part.name)
        return ("respond",) if found is not None and found.is_interrupt_only else super().token_decisions(part)

    async def invoke(self, runner: SessionRunner) -> AgentResult | None:
        loop, preamble = self.loop, self._preamble

        async def turn(input: AgentInput, ctx: TurnContext) -> TurnResult:
            session = runner.session
            # the loop copies the history it is given, and set_messages the one it gets back: no other copy
            result = await loop.run(
                [*preamble, *session.messages] if preamble else session.messages,
                resume=input.resume,
                plan=ctx.plan,
                on_chunk=runner.send_chunk,
                session=session,
                context=ctx.context,
                reclaimed_from=ctx.reclaimed_from,
                effects=ctx.effects,
            )
            session.set_messages(result.messages[len(preamble) :] if preamble else result.messages)
            return TurnResult(finish_reason=result.finish_reason)

        await runner.run(turn)
        return None
