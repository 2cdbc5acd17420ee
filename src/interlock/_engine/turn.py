"""One turn of an invocation: plan → claim → handler → commit, or give back on every exit.

The plan (the input's resume, validated against the history, its tokens checked) comes
before anything runs or is claimed, so a refusal changes nothing. A resume of an interrupted
snapshot then claims it (:mod:`interlock._engine.commit`); the handler runs; the commit is fenced
by the claim. A failure restores the session state and gives the claim and the effect
journal's reservations back; so does a cancellation, which propagates.

Before its first turn an invocation loads the state it starts from (:func:`load_state`:
client-sent, a snapshot, or a session's latest). A resume by session id that lost a race
loads the winner's turn as the session's latest; :func:`answered_earlier` tells it so
(ABORTED naming the winner), as a resume by snapshot id is told. A refusal that needs no turn
to run becomes :class:`PreTurnFailure` (the invocation's output carries it as ``error``); a
contradictory init raises (``output()`` raises it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import (
    ClaimConflictError,
    FailedPreconditionError,
    InterlockError,
    InvalidArgumentError,
    PermissionDeniedError,
    ResumeError,
    SnapshotNotFoundError,
    UsageError,
)
from ..interrupts._plan import Resume
from ..interrupts._policy import Vote, automatic, check_answers, votes_of
from ..interrupts._replay import spend_pause
from ..interrupts._tokens import check_tokens
from ..messages import Message
from ..models import ModelChunk
from ..parts import ToolRequestPart
from ..records._sessions import SessionState, Snapshot, new_id, trusted_state
from ..records.snapshots import claim_state, conflict
from ..stores import SnapshotStore
from ..telemetry import _hooks as hooks
from .commit import TurnWriter, error_info, give_back
from .effects import Effects, check_in_doubt_answers
from .io import AgentInit, AgentInput, TurnContext, TurnEnd

if TYPE_CHECKING:
    from ..interrupts._plan import ResumePlan
    from ..records._sessions import ErrorInfo, Session, Snapshot
    from ..stores import SessionStore, SnapshotStore
    from .commit import ClaimHold
    from .detached import DetachedRun
    from .io import AgentInit, StreamChunk
    from .protocols import RunnableAgent, TurnHandler


class TurnHost(Protocol):
    """What a turn reads and updates of the invocation it runs in (the engine's ``Invocation``)."""

    agent: RunnableAgent
    store: SessionStore | None
    init: AgentInit
    named_snapshot: str | None
    context: dict[str, Any]
    tenant: str | None
    writer: TurnWriter | None
    session: Session
    tip: Snapshot | None
    error: ErrorInfo | None
    failed: bool
    detached: DetachedRun | None
    trace: hooks.TurnTrace | None
    store_ready: bool
    turn_index: int
    model_index: int | float | None
    last_finish_reason: str | None

    @property
    def detached_id(self) -> str | None: ...

    def emit(self, chunk: StreamChunk) -> None: ...

    def emit_failed_turn_end(self) -> None: ...


@dataclass(kw_only=True, slots=True)
class QueuedTurn:
    """An input waiting for its turn, with the snapshot id reserved for it (server-managed)."""

    input: AgentInput
    snapshot_id: str | None


class Turn:
    """One turn of ``inv``: built when it starts (the session starts its turn), then :meth:`run`."""

    def __init__(self, inv: TurnHost, queued: QueuedTurn) -> None:
        session = inv.session
        self.inv = inv
        self.input = queued.input
        self.turn_id = queued.snapshot_id or (new_id() if inv.store is not None else None)
        self.parent = inv.tip
        self.good = session.state.copy()
        session.start_turn()
        inv.model_index = 0
        self.index, inv.turn_index = inv.turn_index, inv.turn_index + 1
        self.hold: ClaimHold | None = None
        self.votes: list[Vote] = []  # quorum votes the resume casts
        self.voted_only = False  # they were recorded without reaching the quorum: nothing else happens
        self.effects = self._effects()

    async def run(self, handler: TurnHandler) -> None:
        """Validate, claim, run the handler, commit (fenced by the claim); on failure undo all."""
        inv = self.inv
        try:
            plan = await self._claim()
            if self.voted_only:
                self._end_voted()
                return
            if self.input.message is not None:
                inv.session.add_messages(self.input.message)
            result = await handler(self.input, self._context(plan))
            finish = result.finish_reason if result else None
            await self._commit(finish, plan)
        except Exception as exc:
            inv.session.state = self.good
            inv.failed = True
            inv.error = error_info(exc)
            await give_back(self.inv.writer, self.hold, self.effects)
            inv.emit_failed_turn_end()
            return
        except asyncio.CancelledError:  # aborted or cancelled mid-turn: give the interrupt back
            await give_back(self.inv.writer, self.hold, self.effects)
            raise
        self._end(finish)

    async def _claim(self) -> ResumePlan | None:
        """The plan (before anything runs or is claimed: a refusal changes nothing), then the claim."""
        inv, parent, store = self.inv, self.parent, self.inv.store
        plan, nonces = await self._plan()
        if plan is not None:
            await self._spend_client_state()
        if plan is not None and parent is not None and parent.finish_reason == "interrupted" and self.turn_id:
            assert inv.writer is not None
            last = len(inv.session.messages) - 1
            ballots = [v.ballot() for v in self.votes]
            self.hold = await inv.writer.claim(parent, self.turn_id, plan, nonces, self.effects, last, ballots)
            self.voted_only = self.hold is None
        elif self.votes:
            raise FailedPreconditionError(
                "this answer is a quorum vote, and votes are kept by a server-managed agent's store; "
                "serve the agent with a store to take votes"
            )
        if plan is not None:
            hooks.resuming(plan, inv.context, self.hold.turn_id if self.hold else None)
        if self.hold is None and store is not None and not inv.store_ready:
            await store.ready()  # before any model or tool runs (a claim's write has checked it already)
            inv.store_ready = True
        return plan

    def _context(self, plan: ResumePlan | None) -> TurnContext:
        parent = self.parent
        return TurnContext(
            snapshot_id=self.turn_id,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            turn_index=self.index,
            context=self.inv.context,
            plan=plan,
            reclaimed_from=self.hold.reclaimed_from if self.hold else None,
            effects=self.effects,
        )

    async def _commit(self, finish: str | None, plan: ResumePlan | None) -> None:
        """Hand the claim to the detached run's final write, or commit the turn's snapshot under it."""
        inv, writer = self.inv, self.inv.writer
        if inv.detached is not None:
            if writer is not None and self.effects is not None:
                await writer.flush(self.effects)
            inv.detached.hand_over(self.hold, self.parent, plan)  # the detached run's final write commits the claim
            self.hold = None
        elif writer is not None and self.turn_id is not None:
            traced = inv.trace.metadata() if inv.trace else {}
            inv.tip = await writer.commit(
                inv.session, self.turn_id, self.parent, finish, plan, self.hold, self.effects, traced
            )

    def _end(self, finish: str | None) -> None:
        """Stream the paused turn's interrupts, if it paused, and the turn's end."""
        inv = self.inv
        inv.last_finish_reason = finish
        if finish == "interrupted":
            paused = interrupts_chunk(inv.session.messages, inv.store, inv.model_index)
            if paused is not None:
                inv.emit(paused)
        committed = inv.store is not None and inv.detached_id is None
        inv.emit(TurnEnd(snapshot_id=self.turn_id if committed else None, finish_reason=finish))

    def _end_voted(self) -> None:
        """A resume that only cast quorum votes: the turn stays paused on its snapshot, which now holds them."""
        inv = self.inv
        inv.last_finish_reason = "interrupted"
        paused = interrupts_chunk(inv.session.messages, inv.store, inv.model_index)
        if paused is not None:
            inv.emit(paused)
        inv.emit(TurnEnd(snapshot_id=self.parent.snapshot_id if self.parent else None, finish_reason="interrupted"))

    def _effects(self) -> Effects | None:
        """The turn's effect journal: server-managed agents journal every tool call in their store."""
        inv = self.inv
        if inv.writer is None or self.turn_id is None:
            return None
        return inv.writer.effects(inv.session.session_id, self.parent, self.turn_id)

    async def _plan(self) -> tuple[ResumePlan | None, tuple[str, ...]]:
        """The input's resume, validated against the history (``None`` without one), and its tokens' nonces.

        The resume tokens are checked here (:func:`interlock.interrupts.check_tokens`), once. A
        resume by session id whose refs another resume answered meanwhile is refused as that
        lost race (:func:`answered_earlier`), not as stale refs.
        """
        inv, input = self.inv, self.input
        if input.resume is None:
            return None, ()
        if input.message is not None:
            raise FailedPreconditionError(  # Genkit's status: its message would follow the model's pause
                "Cannot 'resume' generation unless the previous message is a model message with at least one "
                "tool request: an agent input carries a message or a resume, not both; send the resume first, "
                "then the message in a new input"
            )
        if inv.store is not None and inv.tip is None:
            raise SnapshotNotFoundError(
                f"there is no snapshot to resume in session {inv.session.session_id}: "
                "resume by the snapshotId or sessionId of the interrupted turn"
            )
        try:
            plan = inv.agent.check_resume(input.resume, inv.session.messages)
        except ResumeError:
            lost = await answered_earlier(inv.agent, inv.init, inv.tip, input.resume, inv.tenant)
            if lost is not None:
                raise lost from None
            raise
        tip = inv.tip.snapshot_id if inv.tip else None
        try:
            self.votes = check_answers(
                plan, inv.context.get("identity"), votes=votes_of(inv.tip), automatic=automatic(plan)
            )
        except PermissionDeniedError as refused:
            hooks.answer_refused(refused.details, refused.details.get("policy"))
            raise
        identity = inv.context.get("identity")
        nonces = check_tokens(inv.agent, plan, session_id=inv.session.session_id, snapshot_id=tip, identity=identity)
        named = tip is not None and tip == inv.named_snapshot
        check_in_doubt_answers(plan, named_snapshot=named, tokens_checked=inv.agent.host.resume_tokens is not None)
        return plan, nonces

    async def _spend_client_state(self) -> None:
        """A client-managed resume, once accepted, spends its paused state (:mod:`interlock.interrupts._replay`)."""
        inv = self.inv
        spent = inv.agent.host.spent_tokens
        if spent is not None and inv.store is None:
            await spend_pause(spent, inv.agent.name, inv.session.state, tenant=inv.tenant)


def interrupts_chunk(
    messages: list[Message], store: SnapshotStore | None, model_index: int | float | None
) -> ModelChunk | None:
    """The chunk that streams the paused requests (as committed: with their resume tokens) before the turn end.

    Server-managed: a final ``role: "tool"`` model chunk, as Genkit JS and Go send it.
    Client-managed: the same parts as a ``role: "model"`` chunk with the paused message's
    index, because Genkit's Python client rebuilds the history it sends back from the
    chunks: a model chunk folds into the paused message, which it then replaces with the
    output's copy, so the state it returns stays exact (and signed state still verifies).
    ``None`` when the last message has no interrupts.
    """
    interrupts = messages[-1].interrupts if messages else []
    if not interrupts:
        return None
    if store is not None:
        return ModelChunk(role="tool", content=list(interrupts))
    return ModelChunk(role="model", index=model_index, content=list(interrupts))


class PreTurnFailure(Exception):
    """A graceful failure before any turn ran (missing or unresumable snapshot)."""

    def __init__(self, error: InterlockError, session_id: str | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.session_id = session_id


async def load_state(agent: RunnableAgent, init: AgentInit, tenant: str | None) -> tuple[SessionState, Snapshot | None]:
    """The session state ``init`` names, and the snapshot it resumes from (``None`` for a new session)."""
    store, name = agent.store, agent.name
    if store is None:
        return _client_state(agent, init), None
    if init.state is not None:
        raise UsageError(
            f"Cannot send 'state' to agent '{name}': this agent uses a server-managed store. "
            "Send 'snapshotId' or 'sessionId' instead."
        )
    if init.snapshot_id:
        return await _load_snapshot(store, name, tenant, init.snapshot_id, init.session_id)
    if init.session_id:
        return await _load_session(store, name, tenant, init.session_id)
    return trusted_state(session_id=new_id(), messages=[], custom=None, artifacts=[]), None


def _client_state(agent: RunnableAgent, init: AgentInit) -> SessionState:
    for key, given in (("snapshotId", init.snapshot_id), ("sessionId", init.session_id)):
        if given:
            raise UsageError(
                f"Cannot use '{key}' with agent '{agent.name}': this agent has no store configured "
                "(client-managed state). Send 'state' instead."
            )
    state = init.state.copy() if init.state else SessionState()
    if agent.host.state_signing is not None:  # before anything runs: a forged history runs nothing
        try:
            state = agent.host.state_signing.verify_state(state)
        except InterlockError as exc:
            raise PreTurnFailure(exc, state.session_id) from None
    state.session_id = state.session_id or new_id()
    return state


async def _load_snapshot(
    store: SnapshotStore, agent: str, tenant: str | None, snapshot_id: str, session_id: str | None
) -> tuple[SessionState, Snapshot]:
    snap = await store.load(snapshot_id, tenant=tenant)
    if snap is None or not snap.belongs_to(agent):
        raise PreTurnFailure(SnapshotNotFoundError(f"Snapshot {snapshot_id} not found"), session_id)
    if session_id and snap.session_id != session_id:
        raise InvalidArgumentError(
            f"Snapshot {snapshot_id} does not belong to session {session_id} (it belongs to {snap.session_id})."
        )
    status = snap.read_status()
    if status != "completed" or snap.state is None:
        raise PreTurnFailure(
            InvalidArgumentError(
                f"Snapshot {snapshot_id} is not resumable (status: {status}). "
                "Only 'completed' snapshots can be resumed."
            ),
            snap.session_id,
        )
    state = snap.state
    state.session_id = snap.session_id
    return state, snap


async def _load_session(
    store: SnapshotStore, agent: str, tenant: str | None, session_id: str
) -> tuple[SessionState, Snapshot | None]:
    """The session's latest completed snapshot, walking back past failed and abandoned turns."""
    snap = await store.latest(session_id, tenant=tenant)
    if snap is not None and not snap.belongs_to(agent):
        raise PreTurnFailure(SnapshotNotFoundError(f"Session {session_id} not found"), session_id)
    seen: set[str] = set()
    while snap is not None and (snap.status != "completed" or snap.state is None):
        seen.add(snap.snapshot_id)
        parent = None if snap.parent_id is None else await store.load(snap.parent_id, tenant=tenant)
        if snap.read_status() == "pending" and not _abandoned(snap, parent):
            raise PreTurnFailure(
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


def _abandoned(pending: Snapshot, parent: Snapshot | None) -> bool:
    """A pending resume whose claim on its parent lapsed: its runner died or stalled, so it no longer runs."""
    return parent is not None and parent.claimed_by == pending.snapshot_id and claim_state(parent) == "lapsed"


async def answered_earlier(
    agent: RunnableAgent, init: AgentInit, tip: Snapshot | None, resume: Resume, tenant: str | None
) -> ClaimConflictError | None:
    """For a resume by session id that does not fit ``tip`` (the session's latest): the answer that won, if one did.

    A resume by session id that loads the session after a racing resume committed finds the
    winner's turn as the latest, so its refs are stale there. The snapshot that paused on
    them is the one whose history ends with the latest model message that asked for them;
    when the resume fits that snapshot (its validation and resume tokens, checked as a
    resume by its snapshot id would be: a token refused there is refused here) and another
    turn answered it, the refusal is that turn's: ``ABORTED`` naming the winner. ``None``
    otherwise (refs that never fit: the validation's own refusal stands). It loads only the
    snapshots written since that message.
    """
    if init.snapshot_id or tip is None or tip.state is None:  # by snapshot id: that snapshot's own refusal
        return None
    history = tip.state.messages
    asked = _last_asking(history, {(e.name, e.ref or None) for e in (*resume.restart, *resume.respond)})
    snap = None if asked < 0 or agent.store is None else await _paused_at(agent.store, tip, asked + 1, tenant)
    if snap is None or snap.state is None or snap.finish_reason != "interrupted" or claim_state(snap) != "answered":
        return None
    try:
        plan = agent.check_resume(resume, snap.state.messages)
    except InterlockError:
        return None
    check_tokens(agent, plan, session_id=snap.session_id, snapshot_id=snap.snapshot_id)
    return conflict(snap.snapshot_id, snap.claimed_by, answered=True)


async def _paused_at(store: SnapshotStore, tip: Snapshot, length: int, tenant: str | None) -> Snapshot | None:
    """``tip`` or the ancestor of it whose history is ``length`` messages long, if there is one."""
    snap: Snapshot | None = tip
    while snap is not None and (snap.state is None or len(snap.state.messages) > length):
        snap = None if snap.parent_id is None else await store.load(snap.parent_id, tenant=tenant)
    return snap if snap is not None and snap.state is not None and len(snap.state.messages) == length else None


def _last_asking(history: list[Message], wanted: set[tuple[str, str | None]]) -> int:
    """The index of the last model message with a tool request that ``wanted`` names (-1: none)."""
    for i in range(len(history) - 1, -1, -1):
        message = history[i]
        if message.role == "model" and any(
            isinstance(p, ToolRequestPart) and (p.name, p.ref or None) in wanted for p in message.content
        ):
            return i
    return -1
