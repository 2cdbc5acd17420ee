"""Where an invocation starts: the state it loads (client-sent, a snapshot, or a session's latest).

A resume by session id that lost a race loads the winner's turn as the session's latest;
:func:`answered_earlier` tells it so (ABORTED naming the winner), as a resume by snapshot id is told.

A refusal that needs no turn to run becomes :class:`PreTurnFailure` (the invocation's output
carries it as ``error``); a contradictory init raises (``output()`` raises it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    ClaimConflictError,
    FailedPreconditionError,
    InterlockError,
    InvalidArgumentError,
    SnapshotNotFoundError,
    UsageError,
)
from ..interrupts._plan import Resume
from ..interrupts._tokens import check_tokens
from ..messages import Message
from ..parts import ToolRequestPart
from ..records._sessions import SessionState, Snapshot, new_id, trusted_state
from ..records.snapshots import claim_state, conflict
from ..stores import SnapshotStore
from .io import AgentInit

if TYPE_CHECKING:
    from .protocols import RunnableAgent


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
