"""One invocation of an agent: its inputs, the turn loop, the stream and the output.

Inputs are read eagerly (a detach is noticed while a turn runs); turns run one after
another. Server-managed turns reserve their snapshot id up front and write it at the
turn end; a resume of an interrupted snapshot first *claims* it, atomically, so exactly
one of several racing resumes runs its tools.

The pieces live by what they hold: loading the state an init names (``_session_load``), one
turn: plan, claim, handler, commit or give back (``_turn``), the writes of a turn's claim,
commit and give-back (``_turn_commit``), the detached run: pending row,
heartbeat, abort watch and final write (``_detached_run``), and what an invocation answers:
its output and a paused turn's interrupts chunk (``_invocation_output``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from ..errors import UsageError
from ..models import ModelChunk
from ..records._sessions import ErrorInfo, Session, SessionState, Snapshot, new_id, trusted_state
from ..stores import SnapshotStore, check_tenant
from ..telemetry import _hooks as hooks
from .commit import ClaimHold, Claims, TurnWriter, error_info
from .detached import DetachedRun
from .handoff import handoff_metadata, handoff_named, read_handoff
from .io import END, AgentInit, AgentInput, AgentOutput, AgentResult, Ended, StreamChunk, TurnEnd, Waiting
from .protocols import RunnableAgent, SessionRunner, TurnHandler
from .turn import PreTurnFailure, QueuedTurn, Turn, load_state

_background: set[asyncio.Task[Any]] = set()


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
                claims=Claims(agent.store, self.tenant, ttl=agent.host.claim_ttl),
            )
        )
        self._inputs: asyncio.Queue[AgentInput | Ended] | None = None
        """Inputs that wait for the reader task (:meth:`put_input` takes most at once; made on first use)."""
        self._reader_busy = False
        self._inputs_ended = False
        loop = asyncio.get_running_loop()
        self.chunks: Waiting[StreamChunk | Ended] = Waiting()
        self.output: asyncio.Future[AgentOutput] = loop.create_future()
        self._output_waiters: list[asyncio.Future[None]] | None = None
        """The connections' waits for the output (:meth:`until_output`), woken as it is set."""
        self._abort: asyncio.Event | None = None
        empty = trusted_state(session_id=None, messages=[], custom=None, artifacts=[])  # replaced by the loaded one
        self.session = Session(empty, sink=self._put_chunk, transform=agent.custom_transform)
        self.tip: Snapshot | None = None
        self.last_finish_reason: str | None = None
        self.error: ErrorInfo | None = None
        self.detached: DetachedRun | None = None
        self._turns: Waiting[QueuedTurn | Ended] = Waiting()
        self._running: QueuedTurn | None = None
        self.trace: hooks.TurnTrace | None = None
        self.store_ready = False
        self._loop = loop
        self._thread = threading.get_ident()
        self.turn_index = 0
        self.model_index: int | float | None = 0
        """The index of the last model chunk streamed (the paused message's, when a turn pauses)."""
        self.failed = False
        self._tasks: list[asyncio.Task[Any]] = []
        self._handed = False
        """The turn went to the worker queue (``detach_to``) or is handed back to it: nothing to finalize here."""
        self._pending = None if handed is None else handed[0]
        """On a worker: the pending row whose turn this invocation runs (:func:`run_handed_off`)."""
        self.main = loop.create_task(self._main())
        self.main.add_done_callback(self._settle)
        if handed is not None and self.writer is not None:
            pending, lease = handed
            self.detached = DetachedRun(
                writer=self.writer, snapshot_id=pending.snapshot_id, session_id=pending.session_id, lease=lease
            )
            self.session.detach_sink()
            self._tasks += self.detached.keep_alive(self._aborted)
            self.store_ready = True  # the lease's write checked the store already

    @property
    def abort_event(self) -> asyncio.Event:
        """Set once the run is aborted (made on first use: most runs never look)."""
        if self._abort is None:
            self._abort = asyncio.Event()
        return self._abort

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
            self.model_index = chunk.index
        transformed = self.agent.transform_chunk(chunk)
        if transformed is not None:
            self.chunks.put_nowait(transformed)

    def emit_failed_turn_end(self) -> None:
        with contextlib.suppress(Exception):
            self.emit(TurnEnd(finish_reason="failed"))

    def _close_stream(self) -> None:
        self.chunks.put_nowait(END)

    # the invocation ----------------------------------------------------------------------

    async def _main(self) -> None:
        try:
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
            reader = None
            if not self._inputs_ended or self._inputs_waiting():  # inputs may still come, or some wait
                reader = asyncio.ensure_future(self._read_inputs())
                self._tasks.append(reader)
            try:
                result = await self.agent.invoke(SessionRunner(self))
            except asyncio.CancelledError:
                result = None
                if not self.abort_event.is_set():
                    self.error = ErrorInfo(status="CANCELLED", message="the invocation was cancelled")
            except Exception as exc:
                self.failed = True
                self.error = error_info(exc)
                self.emit_failed_turn_end()
                result = None
            finally:
                if reader is not None:
                    reader.cancel()
            try:
                await self._finish(result)
            except BaseException as exc:  # never leave a caller waiting on an unresolved output
                self._fail_thrown(exc)
                raise
        finally:  # what the done callback would do, done here: the task ends with no callback to schedule
            task = asyncio.current_task()
            if task is not None:
                task.remove_done_callback(self._settle)
                self._settle(task)

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

    def until_output(self) -> asyncio.Future[None]:
        """A future done once :attr:`output` is: a waiter's own, so cancelling it leaves the output be.

        It is woken as the output is set (no callback of the output's to schedule first).
        """
        waiter = self._loop.create_future()
        if self.output.done():
            waiter.set_result(None)
        elif self._output_waiters is None:
            self._output_waiters = [waiter]
        else:
            self._output_waiters.append(waiter)
        return waiter

    def _wake_output_waiters(self) -> None:
        waiters, self._output_waiters = self._output_waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def _resolve(self, output: AgentOutput) -> None:
        if not self.output.done():
            self.output.set_result(output)
            self._wake_output_waiters()
        self._close_stream()

    def _settle(self, task: asyncio.Task[None]) -> None:
        """Resolve the output if the invocation ended without doing so (e.g. cancelled before it started).

        The main task's done callback, for a task cancelled before its coroutine started; else
        :meth:`_main` calls it as it ends (and takes the callback off).
        """
        self.session.detach_sink()  # the session's sink is our method: without this cycle, refcounting frees us
        if not self.output.done():
            error = ErrorInfo(status="CANCELLED", message="the invocation was cancelled before it finished")
            self._resolve(AgentOutput(session_id=self.session.state.session_id, finish_reason="failed", error=error))

    def _fail_thrown(self, exc: BaseException) -> None:
        if not self.output.done():
            self.output.set_exception(exc)
            self._wake_output_waiters()
        self._close_stream()

    def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()

    # inputs and detach -------------------------------------------------------------------

    def put_input(self, item: AgentInput | Ended) -> None:
        """Take one input (or the end of inputs), in order.

        One that needs no await (no detach) is queued as a turn at once, unless inputs wait
        before it; the rest go through the reader task (:meth:`_read_inputs`).
        """
        if self._reader_busy or self._inputs_waiting() or (item is not END and item.detach):
            self.inputs.put_nowait(item)
        elif item is END:
            self._inputs_ended = True
            self._turns.put_nowait(END)
        elif item.message is not None or item.resume is not None:
            self._turns.put_nowait(QueuedTurn(input=item, snapshot_id=new_id() if self.store is not None else None))

    @property
    def inputs(self) -> asyncio.Queue[AgentInput | Ended]:
        """The queue of inputs waiting for the reader task."""
        if self._inputs is None:
            self._inputs = asyncio.Queue()
        return self._inputs

    def _inputs_waiting(self) -> bool:
        return self._inputs is not None and not self._inputs.empty()

    async def _read_inputs(self) -> None:
        while True:
            item = await self.inputs.get()
            if item is END:
                self._turns.put_nowait(END)
                return
            self._reader_busy = True  # inputs sent meanwhile wait their turn behind this one
            try:
                if await self._read(item):
                    return
            finally:
                self._reader_busy = False

    async def _read(self, item: AgentInput) -> bool:
        """Queue ``item``'s turn, detaching first if it asks to; ``True`` when it was handed to the worker queue."""
        has_payload = item.message is not None or item.resume is not None
        reserved = new_id() if self.store is not None and has_payload else None
        if item.detach and reserved is not None and await self._hand_off(item, reserved):
            return True
        if item.detach:
            await self._detach(reserved)
        if has_payload:
            self._turns.put_nowait(QueuedTurn(input=item, snapshot_id=reserved))
        return False

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

        The pending row carries the input and the context (:mod:`interlock._engine.handoff`); it and its
        job are written in one transaction (both or neither). A detach sent while a turn runs in
        this process keeps that turn here.
        """
        target = self.agent.host.detach_to
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
        self._turns.put_nowait(QueuedTurn(input=input, snapshot_id=snapshot_id))
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
        while not self.failed:
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
                    await Turn(self, item).run(handler)
                    self.trace.finish(
                        finish_reason=self.last_finish_reason, error=self.error, messages=self.session.messages
                    )
            finally:
                self._running = None


def run_handed_off(agent: RunnableAgent, pending: Snapshot, lease: ClaimHold) -> Invocation:
    """Run, on a worker, the turn the pending snapshot carries (:mod:`interlock._engine.handoff`), fenced by ``lease``.

    ``lease`` is the worker's claim on ``pending`` itself (:meth:`interlock._engine.commit.Claims.take`);
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


def build_output(
    agent: RunnableAgent,
    store: SnapshotStore | None,
    state: SessionState,
    result: AgentResult | None,
    tip: Snapshot | None,
    error: ErrorInfo | None,
    last_finish_reason: str | None,
) -> AgentOutput:
    """The invocation's output: the agent's result, else the history's last message and the last finish reason."""
    message = (result.message if result else None) or (state.messages[-1] if state.messages else None)
    finish = "failed" if error else ((result.finish_reason if result else None) or last_finish_reason)
    return AgentOutput(
        session_id=state.session_id,
        snapshot_id=tip.snapshot_id if tip else None,
        state=None if store is not None else outgoing(agent, state),
        message=message,
        artifacts=list(result.artifacts) if result and result.artifacts is not None else list(state.artifacts),
        finish_reason=finish,
        error=error,
    )


def outgoing(agent: RunnableAgent, state: SessionState) -> SessionState:
    """Client-managed state as it leaves the agent: transformed, then signed (``state_signing``)."""
    out = agent.transform_state(state.copy())
    keyring = agent.host.state_signing
    return out if keyring is None else keyring.sign_state(out)
