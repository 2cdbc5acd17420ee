"""One invocation of an agent: init, the turn loop, detach, abort, claims and snapshots.

Inputs are read eagerly (a detach is noticed while a turn runs); turns run one after
another. Server-managed turns reserve their snapshot id up front and write it at the
turn end; a resume of an interrupted snapshot first *claims* it, atomically, so exactly
one of several racing resumes runs its tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from . import metadata as md
from .agent_io import AgentInit, AgentInput, AgentOutput, AgentResult, StreamChunk, TurnContext, TurnEnd, TurnResult
from .claims import ClaimHold, Claims, claim_state
from .decisions import audit_record
from .effects import Effects
from .errors import (
    FailedPreconditionError,
    InterlockError,
    InvalidArgumentError,
    SnapshotNotFoundError,
    UsageError,
)
from .interrupts import Resume, ResumePlan
from .messages import Message
from .models import ModelChunk
from .notifications import commit_events
from .outbox import OutboxEvent
from .parts import ToolRequestPart
from .sessions import ErrorInfo, Session, SessionState, Snapshot, new_id, utcnow
from .signing import Keyring
from .stores import JournalUpdater, SessionStore, Updater, check_tenant
from .telemetry import hooks
from .tokens import TokenDecision, TokenSigner, check_tokens, mint_tokens
from .tools import to_json

__all__ = ["RunnableAgent", "SessionRunner", "TurnHandler"]


class RunnableAgent(Protocol):
    """What the runtime needs of an agent (:class:`~interlock.agents.Agent` is one)."""

    name: str
    store: SessionStore | None
    claim_ttl: float
    heartbeat_interval: float
    state_signing: Keyring | None
    resume_tokens: TokenSigner | None
    require_resume_tokens: bool
    notify: bool

    async def invoke(self, runner: SessionRunner) -> AgentResult | None: ...
    def check_resume(self, resume: Resume, history: list[Message]) -> ResumePlan: ...
    def transform_state(self, state: SessionState) -> SessionState: ...
    def custom_transform(self, custom: Any) -> Any: ...
    def transform_chunk(self, chunk: StreamChunk) -> StreamChunk | None: ...
    def token_decisions(self, part: ToolRequestPart) -> tuple[TokenDecision, ...]: ...


TurnHandler = Callable[[AgentInput, TurnContext], Awaitable[TurnResult | None]]
"""A custom agent's per-turn function."""

END = object()
"""Marks the end of an input or chunk queue."""
_background: set[asyncio.Task[Any]] = set()


def _error_info(exc: BaseException) -> ErrorInfo:
    if isinstance(exc, InterlockError):
        return ErrorInfo(status=exc.status, message=exc.message, details=exc.details)
    return ErrorInfo(status="INTERNAL", message=str(exc) or type(exc).__name__)


class _PreTurnFailure(Exception):
    """A graceful failure before any turn ran (missing or unresumable snapshot)."""

    def __init__(self, error: InterlockError, session_id: str | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.session_id = session_id


@dataclass(kw_only=True)
class _Turn:
    input: AgentInput
    snapshot_id: str | None


class SessionRunner:
    """What a custom agent function drives: the session, the turn loop, and the stream."""

    def __init__(self, invocation: Invocation) -> None:
        self._inv = invocation

    @property
    def session(self) -> Session:
        """The live session (messages, custom state, artifacts)."""
        return self._inv.session

    @property
    def context(self) -> dict[str, Any]:
        """The caller's context (identity, tenant, ...)."""
        return self._inv.context

    @property
    def aborted(self) -> asyncio.Event:
        """Set when the caller aborts a detached invocation."""
        return self._inv.abort_event

    @property
    def last_finish_reason(self) -> str | None:
        """The finish reason of the last completed turn."""
        return self._inv.last_finish_reason

    def send_chunk(self, chunk: StreamChunk) -> None:
        """Stream a chunk to the caller (dropped after a detach)."""
        self._inv.emit(chunk)

    async def run(self, handler: TurnHandler) -> None:
        """Run ``handler`` once per input, adding each input's message to the history first."""
        await self._inv.run_turns(handler)


class Invocation:
    """The machinery behind one connection to an agent."""

    def __init__(self, agent: RunnableAgent, init: AgentInit, context: dict[str, Any] | None) -> None:
        self.agent = agent
        self.store = agent.store
        self.init = init
        self.context: dict[str, Any] = dict(context or {})
        self.tenant = check_tenant(self.context.get("tenant"))
        self.claims = None if agent.store is None else Claims(agent.store, self.tenant, ttl=agent.claim_ttl)
        self.inputs: asyncio.Queue[AgentInput | object] = asyncio.Queue()
        self.chunks: asyncio.Queue[StreamChunk | object] = asyncio.Queue()
        self.output: asyncio.Future[AgentOutput] = asyncio.get_running_loop().create_future()
        self.abort_event = asyncio.Event()
        self.session = Session(SessionState(), sink=self._put_chunk, transform=agent.custom_transform)
        self.tip: Snapshot | None = None
        self.last_finish_reason: str | None = None
        self.error: ErrorInfo | None = None
        self.detached_id: str | None = None
        self._turns: asyncio.Queue[_Turn | object] = asyncio.Queue()
        self._running: _Turn | None = None
        self._detached_hold: ClaimHold | None = None
        self.trace: hooks.TurnTrace | None = None
        self._detached_turn: tuple[Snapshot | None, ResumePlan | None] = (None, None)
        self._store_ready = False
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._turn_index = 0
        self._model_index: int | float | None = 0
        """The index of the last model chunk streamed (the paused message's, when a turn pauses)."""
        self._failed = False
        self._tasks: list[asyncio.Task[Any]] = []
        self.main = asyncio.ensure_future(self._main())
        self.main.add_done_callback(self._settle)

    # streaming ---------------------------------------------------------------------------

    def _put_chunk(self, chunk: Any) -> None:
        self.emit(chunk)

    def emit(self, chunk: StreamChunk) -> None:
        """Stream a chunk through the chunk transform; a failing transform raises (fail closed).

        Synchronous tools run on a worker thread; what they stream is handed to the event loop.
        """
        if threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self.emit, chunk)
            return
        if self.detached_id is not None:
            return
        if isinstance(chunk, ModelChunk) and chunk.role == "model":
            self._model_index = chunk.index
        transformed = self.agent.transform_chunk(chunk)
        if transformed is not None:
            self.chunks.put_nowait(transformed)

    def _emit_failed_turn_end(self) -> None:
        with contextlib.suppress(Exception):
            self.emit(TurnEnd(finish_reason="failed"))

    def _close_stream(self) -> None:
        self.chunks.put_nowait(END)

    # the invocation ----------------------------------------------------------------------

    async def _main(self) -> None:
        try:
            state, self.tip = await self._load()
        except _PreTurnFailure as failure:
            self._resolve(
                AgentOutput(session_id=failure.session_id, finish_reason="failed", error=_error_info(failure.error))
            )
            return
        except BaseException as exc:
            self._fail_thrown(exc)
            return
        self.session.state = state
        reader = asyncio.ensure_future(self._read_inputs())
        self._tasks.append(reader)
        try:
            result = await self.agent.invoke(SessionRunner(self))
        except asyncio.CancelledError:
            result = None
            if not self.abort_event.is_set():
                self.error = ErrorInfo(status="CANCELLED", message="the invocation was cancelled")
        except Exception as exc:
            self._failed = True
            self.error = _error_info(exc)
            self._emit_failed_turn_end()
            result = None
        finally:
            reader.cancel()
        try:
            await self._finish(result)
        except BaseException as exc:  # never leave a caller waiting on an unresolved output
            self._fail_thrown(exc)
            raise

    async def _finish(self, result: AgentResult | None) -> None:
        if self.detached_id is not None:
            status = "aborted" if self.abort_event.is_set() else "failed" if self.error else "completed"
            with hooks.detached_finished(self.agent.name, self.detached_id, status, self.trace):
                await self._finalize_detached()
            self._stop_tasks()
            return
        self._stop_tasks()
        self._resolve(self._build_output(result))

    def _build_output(self, result: AgentResult | None) -> AgentOutput:
        state = self.session.state
        message = (result.message if result else None) or (state.messages[-1] if state.messages else None)
        finish = "failed" if self.error else ((result.finish_reason if result else None) or self.last_finish_reason)
        return AgentOutput(
            session_id=state.session_id,
            snapshot_id=self.tip.snapshot_id if self.tip else None,
            state=None if self.store is not None else self._outgoing(state),
            message=message,
            artifacts=list(result.artifacts) if result and result.artifacts is not None else list(state.artifacts),
            finish_reason=finish,
            error=self.error,
        )

    def _outgoing(self, state: SessionState) -> SessionState:
        """Client-managed state as it leaves the agent: transformed, then signed (``state_signing``)."""
        out = self.agent.transform_state(state.copy())
        keyring = self.agent.state_signing
        return out if keyring is None else keyring.sign_state(out)

    def _resolve(self, output: AgentOutput) -> None:
        if not self.output.done():
            self.output.set_result(output)
        self._close_stream()

    def _settle(self, task: asyncio.Task[None]) -> None:
        """Resolve the output if the invocation ended without doing so (e.g. cancelled before it started)."""
        if not self.output.done():
            error = ErrorInfo(status="CANCELLED", message="the invocation was cancelled before it finished")
            self._resolve(AgentOutput(session_id=self.session.state.session_id, finish_reason="failed", error=error))

    def _fail_thrown(self, exc: BaseException) -> None:
        if not self.output.done():
            self.output.set_exception(exc)
        self._close_stream()

    def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()

    # init --------------------------------------------------------------------------------

    async def _load(self) -> tuple[SessionState, Snapshot | None]:
        init, name = self.init, self.agent.name
        if self.store is None:
            if init.snapshot_id:
                raise UsageError(
                    f"Cannot use 'snapshotId' with agent '{name}': this agent has no store configured "
                    "(client-managed state). Send 'state' instead."
                )
            if init.session_id:
                raise UsageError(
                    f"Cannot use 'sessionId' with agent '{name}': this agent has no store configured "
                    "(client-managed state). Send 'state' instead."
                )
            state = init.state.copy() if init.state else SessionState()
            if self.agent.state_signing is not None:  # before anything runs: a forged history runs nothing
                try:
                    state = self.agent.state_signing.verify_state(state)
                except InterlockError as exc:
                    raise _PreTurnFailure(exc, state.session_id) from None
            state.session_id = state.session_id or new_id()
            return state, None
        if init.state is not None:
            raise UsageError(
                f"Cannot send 'state' to agent '{name}': this agent uses a server-managed store. "
                "Send 'snapshotId' or 'sessionId' instead."
            )
        if init.snapshot_id:
            return await self._load_snapshot(init.snapshot_id, init.session_id)
        if init.session_id:
            return await self._load_session(init.session_id)
        return SessionState(session_id=new_id()), None

    async def _load_snapshot(self, snapshot_id: str, session_id: str | None) -> tuple[SessionState, Snapshot]:
        assert self.store is not None
        snap = await self.store.load(snapshot_id, tenant=self.tenant)
        if snap is None or not snap.belongs_to(self.agent.name):
            raise _PreTurnFailure(SnapshotNotFoundError(f"Snapshot {snapshot_id} not found"), session_id)
        if session_id and snap.session_id != session_id:
            raise InvalidArgumentError(
                f"Snapshot {snapshot_id} does not belong to session {session_id} (it belongs to {snap.session_id})."
            )
        status = snap.read_status()
        if status != "completed" or snap.state is None:
            raise _PreTurnFailure(
                InvalidArgumentError(
                    f"Snapshot {snapshot_id} is not resumable (status: {status}). "
                    "Only 'completed' snapshots can be resumed."
                ),
                snap.session_id,
            )
        state = snap.state
        state.session_id = snap.session_id
        return state, snap

    async def _load_session(self, session_id: str) -> tuple[SessionState, Snapshot | None]:
        assert self.store is not None
        snap = await self.store.latest(session_id, tenant=self.tenant)
        if snap is not None and not snap.belongs_to(self.agent.name):
            raise _PreTurnFailure(SnapshotNotFoundError(f"Session {session_id} not found"), session_id)
        seen: set[str] = set()
        while snap is not None and (snap.status != "completed" or snap.state is None):
            seen.add(snap.snapshot_id)
            parent = None if snap.parent_id is None else await self.store.load(snap.parent_id, tenant=self.tenant)
            if snap.read_status() == "pending" and not _abandoned(snap, parent):
                raise _PreTurnFailure(
                    FailedPreconditionError(
                        f"Session {session_id} has a turn still running (snapshot {snap.snapshot_id}); wait for it, "
                        "abort it, or resume an earlier snapshot by snapshotId."
                    ),
                    session_id,
                )
            snap = None if parent is None or parent.snapshot_id in seen else parent
        if snap is None or snap.state is None:
            return SessionState(session_id=session_id), None
        snap.state.session_id = session_id
        return snap.state, snap

    # inputs and detach -------------------------------------------------------------------

    async def _read_inputs(self) -> None:
        while True:
            item = await self.inputs.get()
            if item is END:
                self._turns.put_nowait(END)
                return
            assert isinstance(item, AgentInput)
            has_payload = item.message is not None or item.resume is not None
            reserved = new_id() if self.store is not None and has_payload else None
            if item.detach:
                await self._detach(reserved)
            if has_payload:
                self._turns.put_nowait(_Turn(input=item, snapshot_id=reserved))

    async def _detach(self, reserved: str | None) -> None:
        if self.detached_id is not None:
            return
        if self.store is None:
            self._fail_thrown(UsageError("Detach is only supported when a session store is provided."))
            self.main.cancel()
            return
        pending_id = reserved or (self._running.snapshot_id if self._running else None) or new_id()
        self.detached_id = pending_id
        self.session.detach_sink()
        now = utcnow()
        pending = Snapshot(
            snapshot_id=pending_id,
            session_id=self.session.session_id,
            parent_id=self.tip.snapshot_id if self.tip else None,
            created_at=now,
            heartbeat_at=now,
            status="pending",
            metadata={"agent": self.agent.name},
        )
        await self.store.save(pending_id, lambda _: pending, tenant=self.tenant)
        self._tasks.append(asyncio.ensure_future(self._heartbeat(pending_id)))
        self._tasks.append(asyncio.ensure_future(self._watch_abort(pending_id)))
        _background.add(self.main)
        self.main.add_done_callback(_background.discard)
        hooks.detached_enqueued(
            self.agent.name, pending_id, self.session.session_id, self.trace if self._running else None
        )
        self._resolve(AgentOutput(session_id=self.session.session_id, snapshot_id=pending_id, finish_reason="detached"))

    async def _heartbeat(self, snapshot_id: str) -> None:
        assert self.store is not None
        while True:
            await asyncio.sleep(self.agent.heartbeat_interval)

            def beat(cur: Snapshot | None) -> Snapshot | None:
                return cur.evolve(heartbeat_at=utcnow()) if cur is not None and cur.status == "pending" else None

            with contextlib.suppress(Exception):
                await self.store.save(snapshot_id, beat, tenant=self.tenant)

    async def _watch_abort(self, snapshot_id: str) -> None:
        assert self.store is not None
        async for status in self.store.watch(snapshot_id, tenant=self.tenant):
            if status == "aborted":
                self.abort_event.set()
                self.main.cancel()
                return

    async def _finalize_detached(self) -> None:
        """Write the detached run's outcome into its pending row, fenced by the claim of a resumed turn."""
        assert self.store is not None and self.detached_id is not None
        hold, self._detached_hold = self._detached_hold, None
        state = self.session.state.copy()
        error, finish = self.error, ("failed" if self.error else (self.last_finish_reason or "stop"))
        traced = self.trace.metadata() if self.trace else {}
        if finish == "interrupted":
            state.messages = mint_tokens(
                self.agent, state.messages, session_id=self.session.session_id, snapshot_id=self.detached_id
            )
        parent, plan = self._detached_turn
        meta = {} if plan is None else {"resume": audit_record(plan.resume, self.context, plan=plan)}
        events = [] if error else self._events(self.detached_id, parent, finish, state.messages, plan, meta)

        def finalize(cur: Snapshot | None) -> Snapshot | None:
            if cur is None or cur.status != "pending":  # aborted meanwhile: nothing may commit
                raise _NotPending(self.detached_id or "")
            return cur.evolve(
                status="failed" if error else "completed",
                finish_reason=finish,
                error=error,
                state=state,
                heartbeat_at=None,
                metadata={**(cur.metadata or {}), **traced},
            )

        try:
            if self.abort_event.is_set():
                return
            if hold is None:
                await self.store.save_all([(self.detached_id, finalize)], tenant=self.tenant, events=events)
            else:
                await hold.commit([(self.detached_id, finalize)], events=events)
        except _NotPending:
            pass
        except Exception as exc:  # e.g. the claim lapsed: the row must not stay pending
            lost = _error_info(exc)
            with contextlib.suppress(Exception):
                await self.store.save(self.detached_id, _fail_pending(lost), tenant=self.tenant)
        finally:
            if hold is not None:
                await hold.release()

    # turns -------------------------------------------------------------------------------

    async def run_turns(self, handler: TurnHandler) -> None:
        while not self._failed:
            item = await self._turns.get()
            if item is END:
                return
            assert isinstance(item, _Turn)
            self._running = item
            try:
                with hooks.turn(
                    self.agent.name,
                    session_id=self.session.session_id,
                    turn_id=item.snapshot_id,
                    parent=self.tip,
                    tenant=self.tenant,
                    detached=self.detached_id,
                ) as self.trace:
                    await self._run_turn(handler, item)
                    self.trace.finish(
                        finish_reason=self.last_finish_reason, error=self.error, messages=self.session.messages
                    )
            finally:
                self._running = None

    async def _run_turn(self, handler: TurnHandler, turn: _Turn) -> None:
        """One turn: validate, claim, run the handler, commit (fenced by the claim); on failure undo all."""
        session, store = self.session, self.store
        turn_id = turn.snapshot_id or (new_id() if store is not None else None)
        parent = self.tip
        good = session.state.copy()
        session.start_turn()
        self._model_index = 0
        turn_index, self._turn_index = self._turn_index, self._turn_index + 1
        hold: ClaimHold | None = None
        effects = self._effects(parent, turn_id)
        try:
            plan, nonces = self._plan(turn.input)  # before anything runs or is claimed: a refusal changes nothing
            if plan is not None and parent is not None and parent.finish_reason == "interrupted" and turn_id:
                hold = await self._claim(parent, turn_id, plan, nonces, effects)
            if plan is not None:
                hooks.resuming(plan, self.context, hold.turn_id if hold else None)
            if hold is None and store is not None and not self._store_ready:
                await store.ready()  # before any model or tool runs (a claim's write has checked it already)
                self._store_ready = True
            if turn.input.message is not None:
                session.add_messages(turn.input.message)
            ctx = TurnContext(
                snapshot_id=turn_id,
                parent_snapshot_id=parent.snapshot_id if parent else None,
                turn_index=turn_index,
                context=self.context,
                plan=plan,
                reclaimed_from=hold.reclaimed_from if hold else None,
                effects=effects,
            )
            result = await handler(turn.input, ctx)
            finish = result.finish_reason if result else None
            if self.detached_id is not None:
                if effects is not None:
                    await effects.flush()
                self._detached_hold, hold = hold, None  # the detached run's final write commits it
                self._detached_turn = (parent, plan)
            elif store is not None and turn_id is not None:
                self.tip = await self._commit(turn_id, parent, finish, plan, hold, effects)
        except Exception as exc:
            session.state = good
            self._failed = True
            self.error = _error_info(exc)
            await _give_back(hold, effects)
            self._emit_failed_turn_end()
            return
        except asyncio.CancelledError:  # aborted or cancelled mid-turn: give the interrupt back
            await _give_back(hold, effects)
            raise
        self.last_finish_reason = finish
        if finish == "interrupted":
            self._emit_interrupts()
        committed = store is not None and self.detached_id is None
        self.emit(TurnEnd(snapshot_id=turn_id if committed else None, finish_reason=finish))

    def _emit_interrupts(self) -> None:
        """Stream the paused requests (as committed: with their resume tokens) before the turn end.

        Server-managed: a final ``role: "tool"`` model chunk, as Genkit JS and Go send it.
        Client-managed: the same parts as a ``role: "model"`` chunk with the paused message's
        index, because Genkit's Python client rebuilds the history it sends back from the
        chunks: a model chunk folds into the paused message, which it then replaces with the
        output's copy, so the state it returns stays exact (and signed state still verifies).
        """
        messages = self.session.messages
        interrupts = messages[-1].interrupts if messages else []
        if not interrupts:
            return
        if self.store is not None:
            self.emit(ModelChunk(role="tool", content=list(interrupts)))
        else:
            self.emit(ModelChunk(role="model", index=self._model_index, content=list(interrupts)))

    def _effects(self, parent: Snapshot | None, turn_id: str | None) -> Effects | None:
        """The turn's effect journal: server-managed agents journal every tool call in their store."""
        if self.store is None or turn_id is None:
            return None
        return Effects(
            store=self.store,
            tenant=self.tenant,
            agent=self.agent.name,
            session_id=self.session.session_id,
            snapshot_id=parent.snapshot_id if parent else turn_id,
            turn_id=turn_id,
        )

    def _plan(self, input: AgentInput) -> tuple[ResumePlan | None, tuple[str, ...]]:
        """The input's resume, validated against the history (``None`` without one), and its tokens' nonces.

        The resume tokens are checked here (:func:`interlock.tokens.check_tokens`), once.
        """
        if input.resume is None:
            return None, ()
        if input.message is not None:
            raise InvalidArgumentError(
                "an agent input carries a message or a resume, not both: send the resume first, "
                "then the message in a new input"
            )
        if self.store is not None and self.tip is None:
            raise SnapshotNotFoundError(
                f"there is no snapshot to resume in session {self.session.session_id}: "
                "resume by the snapshotId or sessionId of the interrupted turn"
            )
        plan = self.agent.check_resume(input.resume, self.session.messages)
        tip = self.tip.snapshot_id if self.tip else None
        return plan, check_tokens(self.agent, plan, session_id=self.session.session_id, snapshot_id=tip)

    async def _claim(
        self, parent: Snapshot, turn_id: str, plan: ResumePlan, nonces: tuple[str, ...], effects: Effects | None
    ) -> ClaimHold:
        """Claim the interrupted ``parent``; the intents of the calls the resume restarts go in the same write."""
        assert self.claims is not None
        journal: list[tuple[str, JournalUpdater]] = []
        if effects is not None:
            restarts = [(c.request, to_json(c.value)) for c in plan.calls if c.verb == "restart"]
            journal = effects.prepare(restarts, len(self.session.messages) - 1)
        hold = await self.claims.take(parent.snapshot_id, turn_id, nonces=nonces, journal=journal)
        if effects is not None:
            effects.claimed()
        return hold

    async def _commit(
        self,
        turn_id: str,
        parent: Snapshot | None,
        finish: str | None,
        plan: ResumePlan | None,
        hold: ClaimHold | None,
        effects: Effects | None,
    ) -> Snapshot:
        """Write the turn's snapshot; a resumed turn's write is fenced by its claim (ABORTED if it lapsed).

        The journal's deferred outcomes are written in the same transaction (no write of their own).
        """
        assert self.store is not None
        meta: dict[str, Any] = {"agent": self.agent.name, **(self.trace.metadata() if self.trace else {})}
        if isinstance(delegated := self.context.get(md.DELEGATED_BY), dict):  # a sub-agent's turn (delegation)
            meta[md.DELEGATED_BY] = delegated
        if plan is not None:
            meta["resume"] = audit_record(plan.resume, self.context, plan=plan)
        if finish == "interrupted":  # each pending interrupt gets a token bound to this snapshot
            self.session.set_messages(
                mint_tokens(self.agent, self.session.messages, session_id=self.session.session_id, snapshot_id=turn_id)
            )
        snap = Snapshot(
            snapshot_id=turn_id,
            session_id=self.session.session_id,
            parent_id=parent.snapshot_id if parent else None,
            status="completed",
            finish_reason=finish,
            state=self.session.state.copy(),
            metadata=meta,
        )
        journal = effects.commit_updates() if effects is not None else []
        events = self._events(turn_id, parent, finish, self.session.messages, plan, meta)
        writes: list[tuple[str, Updater]] = [(turn_id, lambda _: snap)]
        if hold is None:
            (written,) = await self.store.save_all(writes, tenant=self.tenant, journal=journal, events=events)
        else:
            (written,) = await hold.commit(writes, journal=journal, events=events)
        assert written is not None
        return written

    def _events(
        self,
        turn_id: str,
        parent: Snapshot | None,
        finish: str | None,
        messages: list[Message],
        plan: ResumePlan | None,
        meta: dict[str, Any],
    ) -> list[OutboxEvent]:
        """The outbox rows the turn's commit writes with it (:func:`interlock.notifications.commit_events`)."""
        record: Any = meta.get("resume")
        return commit_events(
            agent=self.agent.name,
            notify=self.agent.notify,
            tenant=self.tenant,
            session_id=self.session.session_id,
            turn_id=turn_id,
            parent_id=parent.snapshot_id if parent else None,
            finish=finish,
            messages=messages,
            plan=plan,
            by=cast(dict[str, Any], record).get("by") if isinstance(record, dict) else None,
        )


async def _give_back(hold: ClaimHold | None, effects: Effects | None) -> None:
    """A turn ends without committing: record its calls' outcomes, then give the interrupt back."""
    if effects is not None:
        await effects.flush()
    if hold is not None:
        await hold.release()


def _abandoned(pending: Snapshot, parent: Snapshot | None) -> bool:
    """A pending resume whose claim on its parent lapsed: its runner died or stalled, so it no longer runs."""
    return parent is not None and parent.claimed_by == pending.snapshot_id and claim_state(parent) == "lapsed"


class _NotPending(Exception):
    """A detached run's row is no longer pending (it was aborted): its outcome is dropped."""


def _fail_pending(error: ErrorInfo) -> Callable[[Snapshot | None], Snapshot | None]:
    def fail(cur: Snapshot | None) -> Snapshot | None:
        if cur is None or cur.status != "pending":
            return None
        return cur.evolve(status="failed", finish_reason="failed", error=error, heartbeat_at=None)

    return fail
