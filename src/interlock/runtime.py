"""One invocation of an agent: its inputs, the turn loop, the stream and the output.

Inputs are read eagerly (a detach is noticed while a turn runs); turns run one after
another. Server-managed turns reserve their snapshot id up front and write it at the
turn end; a resume of an interrupted snapshot first *claims* it, atomically, so exactly
one of several racing resumes runs its tools.

The pieces live by what they hold: loading the state an init names (``_session_load``), a
turn's claim, commit and give-back (``_turn_commit``), the detached run: pending row,
heartbeat, abort watch and final write (``_detached_run``), and what an invocation answers:
its output and a paused turn's interrupts chunk (``_invocation_output``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ._detached_run import DetachedRun
from ._invocation_output import build_output, interrupts_chunk
from ._session_load import PreTurnFailure, answered_earlier, load_state
from ._turn_commit import TurnWriter, error_info, give_back
from .agent_io import AgentInit, AgentInput, AgentOutput, AgentResult, StreamChunk, TurnContext, TurnEnd, TurnResult
from .claims import ClaimHold, Claims
from .connection import END, Ended
from .effects import Effects, check_in_doubt_answers
from .errors import FailedPreconditionError, ResumeError, SnapshotNotFoundError, UsageError
from .handoff import handoff_metadata, handoff_named, read_handoff
from .interrupts import Resume, ResumePlan
from .messages import Message
from .models import ModelChunk
from .parts import ToolRequestPart
from .replay import spend_pause
from .sessions import ErrorInfo, Session, SessionState, Snapshot, new_id
from .signing import Keyring
from .stores import SessionStore, SnapshotStore, check_tenant
from .telemetry import hooks
from .tokens import TokenDecision, TokenSigner, check_tokens

__all__ = ["DetachTarget", "RunnableAgent", "SessionRunner", "TurnHandler", "run_handed_off"]


class DetachTarget(Protocol):
    """Where an agent hands its detached turns (:class:`interlock.workers.WorkerQueue` is one)."""

    async def hand_off(self, store: SnapshotStore, pending: Snapshot, tenant: str | None) -> None:
        """Write the pending row ``pending`` and the job that runs it, in one transaction of ``store``."""
        ...

    async def abort(self, snapshot_id: str, tenant: str | None) -> int: ...


class RunnableAgent(Protocol):
    """What the runtime needs of an agent (:class:`~interlock.agents.Agent` is one)."""

    name: str
    store: SessionStore | None
    claim_ttl: float
    heartbeat_interval: float
    state_signing: Keyring | None
    resume_tokens: TokenSigner | None
    require_resume_tokens: bool
    spent_tokens: SnapshotStore | None
    notify: bool
    detach_to: DetachTarget | None

    async def invoke(self, runner: SessionRunner) -> AgentResult | None: ...
    def check_resume(self, resume: Resume, history: list[Message]) -> ResumePlan: ...
    def transform_state(self, state: SessionState) -> SessionState: ...
    def custom_transform(self, custom: object) -> Any: ...
    def transform_chunk(self, chunk: StreamChunk) -> StreamChunk | None: ...
    def token_decisions(self, part: ToolRequestPart) -> tuple[TokenDecision, ...]: ...


TurnHandler = Callable[[AgentInput, TurnContext], Awaitable[TurnResult | None]]
"""A custom agent's per-turn function."""

_background: set[asyncio.Task[Any]] = set()


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

    def __init__(
        self,
        agent: RunnableAgent,
        init: AgentInit,
        context: dict[str, Any] | None,
        *,
        handed: tuple[Snapshot, ClaimHold] | None = None,
    ) -> None:
        self.agent = agent
        self.store = agent.store
        self.init = init
        self.named_snapshot = init.snapshot_id
        """The snapshot the caller named by id (a resume by session id names none)."""
        self.context: dict[str, Any] = dict(context or {})
        self.tenant = check_tenant(self.context.get("tenant"))
        self.writer = (
            None
            if agent.store is None
            else TurnWriter(
                agent=agent,
                store=agent.store,
                tenant=self.tenant,
                context=self.context,
                claims=Claims(agent.store, self.tenant, ttl=agent.claim_ttl),
            )
        )
        self.inputs: asyncio.Queue[AgentInput | Ended] = asyncio.Queue()
        self.chunks: asyncio.Queue[StreamChunk | Ended] = asyncio.Queue()
        self.output: asyncio.Future[AgentOutput] = asyncio.get_running_loop().create_future()
        self.abort_event = asyncio.Event()
        self.session = Session(SessionState(), sink=self._put_chunk, transform=agent.custom_transform)
        self.tip: Snapshot | None = None
        self.last_finish_reason: str | None = None
        self.error: ErrorInfo | None = None
        self.detached: DetachedRun | None = None
        self._turns: asyncio.Queue[_Turn | Ended] = asyncio.Queue()
        self._running: _Turn | None = None
        self.trace: hooks.TurnTrace | None = None
        self._store_ready = False
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._turn_index = 0
        self._model_index: int | float | None = 0
        """The index of the last model chunk streamed (the paused message's, when a turn pauses)."""
        self._failed = False
        self._tasks: list[asyncio.Task[Any]] = []
        self._handed = False
        """The turn went to the worker queue (``detach_to``) or is handed back to it: nothing to finalize here."""
        self._pending = None if handed is None else handed[0]
        """On a worker: the pending row whose turn this invocation runs (:func:`run_handed_off`)."""
        self.main = asyncio.ensure_future(self._main())
        self.main.add_done_callback(self._settle)
        if handed is not None and self.writer is not None:
            pending, lease = handed
            self.detached = DetachedRun(
                writer=self.writer, snapshot_id=pending.snapshot_id, session_id=pending.session_id, lease=lease
            )
            self.session.detach_sink()
            self._tasks += self.detached.keep_alive(self._aborted)
            self._store_ready = True  # the lease's write checked the store already

    @property
    def detached_id(self) -> str | None:
        """The pending row's id once the invocation detached (``None`` before)."""
        return self.detached.snapshot_id if self.detached is not None else None

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
        except PreTurnFailure as failure:
            if self._pending is not None and self.detached is not None:  # a worker's run that cannot start
                await self.detached.fail(error_info(failure.error))
                await self.detached.release()
                self._stop_tasks()
            self._resolve(
                AgentOutput(session_id=failure.session_id, finish_reason="failed", error=error_info(failure.error))
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
            self.error = error_info(exc)
            self._emit_failed_turn_end()
            result = None
        finally:
            reader.cancel()
        try:
            await self._finish(result)
        except BaseException as exc:  # never leave a caller waiting on an unresolved output
            self._fail_thrown(exc)
            raise

    async def _load(self) -> tuple[SessionState, Snapshot | None]:
        pending = self._pending
        if pending is not None and pending.parent_id is None:  # a handed-off first turn of its session
            return SessionState(session_id=pending.session_id), None
        return await load_state(self.agent, self.init, self.tenant)

    async def _finish(self, result: AgentResult | None) -> None:
        if self._handed:
            self._stop_tasks()
            if self.detached is not None:
                await self.detached.release()
            return
        if self.detached is not None:
            status = "aborted" if self.abort_event.is_set() else "failed" if self.error else "completed"
            with hooks.detached_finished(self.agent.name, self.detached.snapshot_id, status, self.trace):
                finish = "failed" if self.error else (self.last_finish_reason or "stop")
                traced = self.trace.metadata() if self.trace else {}
                await self.detached.finalize(self.session.state.copy(), self.error, finish, traced, self.abort_event)
            self._stop_tasks()
            return
        self._stop_tasks()
        state, tip, error = self.session.state, self.tip, self.error
        self._resolve(build_output(self.agent, self.store, state, result, tip, error, self.last_finish_reason))

    def _resolve(self, output: AgentOutput) -> None:
        if not self.output.done():
            self.output.set_result(output)
        self._close_stream()

    def _settle(self, task: asyncio.Task[None]) -> None:
        """Resolve the output if the invocation ended without doing so (e.g. cancelled before it started)."""
        self.session.detach_sink()  # the session's sink is our method: without this cycle, refcounting frees us
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

    # inputs and detach -------------------------------------------------------------------

    async def _read_inputs(self) -> None:
        while True:
            item = await self.inputs.get()
            if item is END:
                self._turns.put_nowait(END)
                return
            has_payload = item.message is not None or item.resume is not None
            reserved = new_id() if self.store is not None and has_payload else None
            if item.detach and reserved is not None and await self._hand_off(item, reserved):
                return
            if item.detach:
                await self._detach(reserved)
            if has_payload:
                self._turns.put_nowait(_Turn(input=item, snapshot_id=reserved))

    async def _detach(self, reserved: str | None) -> None:
        if self.detached is not None:
            return
        if self.writer is None:
            self._fail_thrown(UsageError("Detach is only supported when a session store is provided."))
            self.main.cancel()
            return
        pending_id = reserved or (self._running.snapshot_id if self._running else None) or new_id()
        session_id = self.session.session_id
        self.detached = DetachedRun(writer=self.writer, snapshot_id=pending_id, session_id=session_id)
        self.session.detach_sink()
        self._tasks += await self.detached.start(self.tip.snapshot_id if self.tip else None, self._aborted)
        _background.add(self.main)
        self.main.add_done_callback(_background.discard)
        hooks.detached_enqueued(self.agent.name, pending_id, session_id, self.trace if self._running else None)
        self._resolve(AgentOutput(session_id=session_id, snapshot_id=pending_id, finish_reason="detached"))

    async def _hand_off(self, item: AgentInput, pending_id: str) -> bool:
        """Send a detached turn to the agent's worker queue (``detach_to``), if it has one and nothing runs here.

        The pending row carries the input and the context (:mod:`interlock.handoff`); it and its
        job are written in one transaction (both or neither). A detach sent while a turn runs in
        this process keeps that turn here.
        """
        target = self.agent.detach_to
        if target is None or self.writer is None or self.detached is not None:
            return False
        if self._running is not None or not self._turns.empty():
            return False
        session_id = self.session.session_id
        self.detached = DetachedRun(writer=self.writer, snapshot_id=pending_id, session_id=session_id)
        self._handed = True
        self.session.detach_sink()
        parent_id = self.tip.snapshot_id if self.tip else None
        try:
            await target.hand_off(
                self.writer.store,
                self.detached.pending_row(parent_id, handoff_metadata(item, self.context, named=self.named_snapshot)),
                self.tenant,
            )
        except Exception as exc:  # neither the row nor its job was written
            error = error_info(exc)
            self._resolve(AgentOutput(session_id=session_id, finish_reason="failed", error=error))
        else:
            hooks.detached_enqueued(self.agent.name, pending_id, session_id, None)
            self._resolve(AgentOutput(session_id=session_id, snapshot_id=pending_id, finish_reason="detached"))
        self._turns.put_nowait(END)
        return True

    def enqueue_turn(self, input: AgentInput, snapshot_id: str) -> None:
        """Queue the one turn of a handed-off run, then the end of its inputs."""
        self._turns.put_nowait(_Turn(input=input, snapshot_id=snapshot_id))
        self._turns.put_nowait(END)

    def hand_back(self) -> None:
        """Stop a worker's run without writing its outcome: its lease is released for another worker."""
        self._handed = True
        self.main.cancel()

    def abort(self) -> None:
        """Stop a worker's run because its snapshot was aborted (nothing is written)."""
        self._aborted()

    def _aborted(self) -> None:
        self.abort_event.set()
        self.main.cancel()

    # turns -------------------------------------------------------------------------------

    async def run_turns(self, handler: TurnHandler) -> None:
        while not self._failed:
            item = await self._turns.get()
            if item is END:
                return
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
        writer = self.writer
        effects = self._effects(parent, turn_id)
        try:
            plan, nonces = await self._plan(turn.input)  # before anything runs or is claimed: a refusal changes nothing
            if plan is not None:
                await self._spend_client_state()
            if plan is not None and parent is not None and parent.finish_reason == "interrupted" and turn_id:
                assert writer is not None
                hold = await writer.claim(parent, turn_id, plan, nonces, effects, len(session.messages) - 1)
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
            if self.detached is not None:
                if writer is not None and effects is not None:
                    await writer.flush(effects)
                self.detached.hand_over(hold, parent, plan)  # the detached run's final write commits the claim
                hold = None
            elif writer is not None and turn_id is not None:
                traced = self.trace.metadata() if self.trace else {}
                self.tip = await writer.commit(session, turn_id, parent, finish, plan, hold, effects, traced)
        except Exception as exc:
            session.state = good
            self._failed = True
            self.error = error_info(exc)
            await give_back(writer, hold, effects)
            self._emit_failed_turn_end()
            return
        except asyncio.CancelledError:  # aborted or cancelled mid-turn: give the interrupt back
            await give_back(writer, hold, effects)
            raise
        self.last_finish_reason = finish
        if finish == "interrupted":
            paused = interrupts_chunk(self.session.messages, self.store, self._model_index)
            if paused is not None:
                self.emit(paused)
        committed = store is not None and self.detached_id is None
        self.emit(TurnEnd(snapshot_id=turn_id if committed else None, finish_reason=finish))

    def _effects(self, parent: Snapshot | None, turn_id: str | None) -> Effects | None:
        """The turn's effect journal: server-managed agents journal every tool call in their store."""
        if self.writer is None or turn_id is None:
            return None
        return self.writer.effects(self.session.session_id, parent, turn_id)

    async def _plan(self, input: AgentInput) -> tuple[ResumePlan | None, tuple[str, ...]]:
        """The input's resume, validated against the history (``None`` without one), and its tokens' nonces.

        The resume tokens are checked here (:func:`interlock.tokens.check_tokens`), once. A
        resume by session id whose refs another resume answered meanwhile is refused as that
        lost race (:func:`~interlock._session_load.answered_earlier`), not as stale refs.
        """
        if input.resume is None:
            return None, ()
        if input.message is not None:
            raise FailedPreconditionError(  # Genkit's status: its message would follow the model's pause
                "Cannot 'resume' generation unless the previous message is a model message with at least one "
                "tool request: an agent input carries a message or a resume, not both; send the resume first, "
                "then the message in a new input"
            )
        if self.store is not None and self.tip is None:
            raise SnapshotNotFoundError(
                f"there is no snapshot to resume in session {self.session.session_id}: "
                "resume by the snapshotId or sessionId of the interrupted turn"
            )
        try:
            plan = self.agent.check_resume(input.resume, self.session.messages)
        except ResumeError:
            lost = await answered_earlier(self.agent, self.init, self.tip, input.resume, self.tenant)
            if lost is not None:
                raise lost from None
            raise
        tip = self.tip.snapshot_id if self.tip else None
        nonces = check_tokens(self.agent, plan, session_id=self.session.session_id, snapshot_id=tip)
        named = tip is not None and tip == self.named_snapshot
        check_in_doubt_answers(plan, named_snapshot=named, tokens_checked=self.agent.resume_tokens is not None)
        return plan, nonces

    async def _spend_client_state(self) -> None:
        """A client-managed resume, once accepted, spends its paused state (:mod:`interlock.replay`)."""
        spent = self.agent.spent_tokens
        if spent is not None and self.store is None:
            await spend_pause(spent, self.agent.name, self.session.state, tenant=self.tenant)


def run_handed_off(agent: RunnableAgent, pending: Snapshot, lease: ClaimHold) -> Invocation:
    """Run, on a worker, the turn the pending snapshot carries (:mod:`interlock.handoff`), fenced by ``lease``.

    ``lease`` is the worker's claim on ``pending`` itself (:meth:`interlock.claims.Claims.take`);
    the outcome is written into ``pending`` under it, and the lease is released on every exit.
    Await the returned invocation's ``main``; :meth:`Invocation.hand_back` stops it unwritten.
    """
    input, context = read_handoff(pending)
    if lease.claims.tenant is not None:  # the tenant the job names and the lease was taken in
        context = {**context, "tenant": lease.claims.tenant}
    init = AgentInit(snapshot_id=pending.parent_id, session_id=pending.session_id)
    invocation = Invocation(agent, init, context, handed=(pending, lease))
    invocation.named_snapshot = handoff_named(pending)
    invocation.enqueue_turn(input, pending.snapshot_id)
    return invocation
