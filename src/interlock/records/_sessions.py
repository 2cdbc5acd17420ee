"""Session state, snapshots, and the live session a turn works on.

A :class:`SessionState` is the conversation: messages, custom state and artifacts. A
:class:`Snapshot` is one persisted copy of it at a turn end, chained to its parent. A
:class:`Session` is the live, mutable view a running turn (and its tools) change; each
change becomes a stream chunk. Every change of a stored snapshot's status or claim is a
named updater of :mod:`interlock.records.snapshots`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from os import register_at_fork, urandom
from typing import Any

import jsonpatch

from .._json import check_json, check_messages, check_object, check_parts, type_name
from .._json_object import is_array
from ..errors import InvalidArgumentError
from ..messages import Message
from ..parts import Part
from ._evolve import evolver, fast_init


class SnapshotStatus(StrEnum):
    """A snapshot's status; members equal their wire strings (``SnapshotStatus.COMPLETED == "completed"``).

    ``expired`` is never written: a pending snapshot whose heartbeat stopped reads as it.
    Unknown values read from a store or the wire are kept as strings.
    """

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    ABORTED = "aborted"
    EXPIRED = "expired"


TERMINAL = frozenset({"completed", "failed", "aborted"})
EXPIRY = timedelta(seconds=60)
"""A pending snapshot whose heartbeat is older than this reads as ``expired``."""


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def new_id() -> str:
    """A fresh random id: a UUID v4 in its canonical text form (``str(uuid.uuid4())``'s, built without the object).

    Ids are made :data:`_IDS_AT_ONCE` at a time from one read of the system's random source (one
    system call instead of one per id); ``list.pop`` hands each out once, whichever thread asks,
    and a forked child empties the pool it inherited, so no two processes share an id.
    """
    while True:
        try:
            return _ids.pop()
        except IndexError:
            _ids.extend(_fresh_ids())


def _fresh_ids() -> list[str]:
    h = urandom(16 * _IDS_AT_ONCE).hex()
    return [_uuid4_text(h[i : i + 32]) for i in range(0, 32 * _IDS_AT_ONCE, 32)]


def _uuid4_text(h: str) -> str:
    """32 random hex digits as a UUID v4's text: the version digit and the variant's bits set."""
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


_IDS_AT_ONCE = 64
_ids: list[str] = []
register_at_fork(after_in_child=_ids.clear)

_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}
"""The RFC 4122 variant: a hex digit with its top two bits set to ``10``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Artifact:
    """A named output kept in session state; adding one with an existing name replaces it."""

    name: str | None = None
    parts: list[Part] = field(default_factory=list[Part])
    metadata: dict[str, Any] | None = None


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class ErrorInfo:
    """An error as it travels in outputs and snapshots: canonical status, message, details."""

    status: str
    message: str
    details: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CustomPatch:
    """A custom-state change as RFC 6902 operations (the first of a turn replaces the whole document)."""

    ops: list[dict[str, Any]]


@dataclass(kw_only=True, slots=True)
class SessionState:
    """The conversation: its id, messages, custom state and artifacts."""

    session_id: str | None = None
    messages: list[Message] = field(default_factory=list[Message])
    custom: Any = None
    artifacts: list[Artifact] = field(default_factory=list[Artifact])

    def __post_init__(self) -> None:
        # Cheap checks on every construction; check_state() also checks each message's contents.
        session_id: Any = self.session_id
        if session_id is not None and not isinstance(session_id, str):
            raise InvalidArgumentError(f"state.session_id must be a string, not {type_name(session_id)}")
        for name, kind in (("messages", Message), ("artifacts", Artifact)):
            items: Any = getattr(self, name)
            if not is_array(items):
                raise InvalidArgumentError(f"state.{name} must be a list of {kind.__name__}, not {type_name(items)}")
            for index, item in enumerate(items):
                if not isinstance(item, kind):
                    raise InvalidArgumentError(
                        f"state.{name}[{index}] must be a {kind.__name__}, not {type_name(item)}"
                        + (" (read wire JSON with interlock._wire)" if isinstance(item, dict) else "")
                    )
        check_json(self.custom, "state.custom")

    def copy(self) -> SessionState:
        """A copy that shares messages (they are immutable) but owns its lists and custom state."""
        state = _new(SessionState)  # trusted_state's build, inline: a turn copies state several times
        state.session_id = self.session_id
        state.messages = list(self.messages)
        state.custom = None if self.custom is None else copy.deepcopy(self.custom)
        state.artifacts = list(self.artifacts)
        return state


_new = object.__new__


def trusted_state(
    *, session_id: str | None, messages: list[Message], custom: Any, artifacts: list[Artifact]
) -> SessionState:
    """A :class:`SessionState` of values already checked (a copy, a store's decoded row), without checking again.

    Construction checks every message's type, which costs O(history) per turn; a state built
    from another state's values, or from messages a store just parsed, needs none of it.
    """
    state = _new(SessionState)
    state.session_id = session_id
    state.messages = messages
    state.custom = custom
    state.artifacts = artifacts
    return state


def check_state(state: object, where: str = "state") -> None:
    """Check caller-supplied state in full: its types, and every message and artifact holds JSON."""
    if not isinstance(state, SessionState):
        raise InvalidArgumentError(f"{where} must be a SessionState, not {type_name(state)}")
    SessionState.__post_init__(state)
    check_messages(state.messages, f"{where}.messages")
    for index, item in enumerate(state.artifacts):
        label = f"{where}.artifacts[{index}]"
        artifact: Any = item  # the fields are typed, but a caller may have put anything in them
        if artifact.name is not None and not isinstance(artifact.name, str):
            raise InvalidArgumentError(f"{label}.name must be a string or None")
        check_parts(artifact.parts, f"{label}.parts")
        check_object(artifact.metadata, f"{label}.metadata")


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    """One persisted copy of a session at a turn end.

    Attributes:
        snapshot_id: this snapshot's id.
        session_id: the session (conversation) it belongs to.
        parent_id: the snapshot it continues, or ``None`` for the first turn.
        status: ``pending`` (a detached turn is running), ``completed``, ``failed`` or
            ``aborted``; ``expired`` is computed at read time (see :meth:`read_status`).
        finish_reason: why the turn ended (``interrupted`` for a paused turn).
        version: bumped by every write; stores use it for optimistic concurrency.
        claimed_by: for an interrupted snapshot, the id of the turn that claimed it (the
            claim's holder, unique per resume attempt: the claim's fencing token).
        claim_expires_at: when the holder's lease runs out unless refreshed; ``None`` with
            ``claimed_by`` set means the holder committed (the interrupt is answered).
            :func:`interlock.records.snapshots.claim_state` reads the two.
    """

    snapshot_id: str
    session_id: str
    parent_id: str | None = None
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime | None = None
    heartbeat_at: datetime | None = None
    status: SnapshotStatus | str = "completed"
    finish_reason: str | None = None
    error: ErrorInfo | None = None
    state: SessionState | None = None
    version: int = 0
    claimed_by: str | None = None
    claim_expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None

    def read_status(self, now: datetime | None = None) -> str:
        """The status as a reader sees it: a pending row with a stale heartbeat is ``expired``."""
        stale = self.stale_at
        return "expired" if stale is not None and (now or utcnow()) > stale else self.status

    @property
    def stale_at(self) -> datetime | None:
        """When a pending row starts to read as ``expired`` (its heartbeat + :data:`EXPIRY`); ``None`` if never."""
        return self.heartbeat_at + EXPIRY if self.status == "pending" and self.heartbeat_at is not None else None

    @property
    def is_terminal(self) -> bool:
        """True for completed, failed and aborted snapshots (their status never changes)."""
        return self.status in TERMINAL

    @property
    def interrupts(self) -> list[Any]:
        """The tool requests this snapshot's turn paused on (empty unless it was interrupted)."""
        if self.finish_reason != "interrupted" or not self.state or not self.state.messages:
            return []
        last = self.state.messages[-1]
        return last.interrupts if last.role == "model" else []

    @property
    def agent(self) -> str | None:
        """The name of the agent that wrote this snapshot (``metadata.agent``)."""
        name = (self.metadata or {}).get("agent")
        return name if isinstance(name, str) else None

    def belongs_to(self, agent: str) -> bool:
        """True when ``agent`` may read and resume this snapshot: it wrote it (or no agent is recorded)."""
        return self.agent is None or self.agent == agent

    def evolve(self, **changes: Any) -> Snapshot:
        """A copy with ``changes`` applied."""
        return _evolve_snapshot(self, **changes)


_evolve_snapshot = evolver(Snapshot)


ChunkSink = Callable[[Any], None]


class Session:
    """The live session a turn works on; tools reach it as ``ctx.session``.

    Changes to custom state and artifacts are streamed: the first custom-state change of
    each turn as a whole-document replace, later ones as RFC 6902 diffs against the value
    last sent.
    """

    def __init__(self, state: SessionState, *, sink: ChunkSink | None = None, transform: Any = None) -> None:
        self.state = state
        self._sink = sink
        self._transform: Callable[[Any], Any] | None = transform
        self._last_sent: Any = None
        self._patched_this_turn = False

    @property
    def session_id(self) -> str:
        assert self.state.session_id is not None
        return self.state.session_id

    @property
    def messages(self) -> list[Message]:
        """The history (do not mutate; use :meth:`add_messages` or :meth:`set_messages`)."""
        return self.state.messages

    @property
    def custom(self) -> Any:
        """The custom state (a deep copy: change it with :meth:`update_custom`)."""
        return copy.deepcopy(self.state.custom)

    @property
    def artifacts(self) -> list[Artifact]:
        return list(self.state.artifacts)

    def add_messages(self, *messages: Message) -> None:
        self.state.messages.extend(messages)

    def set_messages(self, messages: list[Message]) -> None:
        self.state.messages = list(messages)

    def start_turn(self) -> None:
        """Reset the per-turn patch state: the next custom change re-bases the client."""
        self._patched_this_turn = False

    def update_custom(self, fn: Callable[[Any], Any]) -> Any:
        """Replace the custom state by ``fn(current)`` (``fn`` gets a copy) and stream the change."""
        self.state.custom = fn(copy.deepcopy(self.state.custom))
        self._emit_custom()
        return self.custom

    def set_custom(self, value: object) -> None:
        """Replace the custom state and stream the change."""
        self.state.custom = copy.deepcopy(value)
        self._emit_custom()

    def _emit_custom(self) -> None:
        if self._sink is None:
            return
        value = copy.deepcopy(self.state.custom)
        if self._transform is not None:
            value = self._transform(value)
        if not self._patched_this_turn:
            ops: list[dict[str, Any]] = [{"op": "replace", "path": "", "value": value}]
            self._patched_this_turn = True
        else:
            ops = list(jsonpatch.make_patch(self._last_sent, value).patch)
        self._last_sent = value
        if ops:
            self._sink(CustomPatch(ops=ops))

    def add_artifacts(self, *artifacts: Artifact) -> None:
        """Add artifacts (same name replaces) and stream each one."""
        for artifact in artifacts:
            current = self.state.artifacts
            index = next(
                (i for i, a in enumerate(current) if artifact.name is not None and a.name == artifact.name), None
            )
            if index is None:
                current.append(artifact)
            else:
                current[index] = artifact
            if self._sink is not None:
                self._sink(artifact)

    def detach_sink(self) -> None:
        """Stop streaming (after a detach nothing reaches the caller)."""
        self._sink = None
