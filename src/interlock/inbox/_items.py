"""What the approval inbox lists and reports: pending interrupts and audit entries (:mod:`interlock.inbox._inbox`).

:class:`PendingInterrupt` is one call waiting for an answer, read from the store's index of
open interrupts (:mod:`interlock.records._interrupt_index`); :class:`AuditEntry` is one resume of a
session as its snapshot recorded it (``metadata["resume"]``), with an :class:`AuditAnswer`
per answered call.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .. import metadata as md
from .._json_object import is_array, is_object
from ..interrupts._decisions import DecisionLabel
from ..parts import ToolRequestPart
from ..records._interrupt_index import OpenInterrupt
from ..records._sessions import Snapshot
from ..tools._signature import data_as

if TYPE_CHECKING:
    from .._engine.io import AgentOutput
    from ..interrupts._plan import Resume

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingInterrupt:
    """One interrupt waiting for an answer.

    Attributes:
        data: the interrupt data (``metadata.interrupt``; ``True`` when the tool gave none).
        is_hold: the call is held by tool-approval middleware (not paused by the tool itself).
        in_doubt: the effect journal paused the call: an earlier attempt started and never
            reported back, so it may or may not have taken effect
            (:func:`interlock.metadata.is_in_doubt`). Approve runs it again, respond marks it
            done, reject skips it.
        idempotency_key: an in-doubt call's key (the same on every attempt), else ``None``.
        attempts: how many attempts an in-doubt call has had, else ``None``.
        created_at: when the paused turn ended; ``age`` is measured from it.
        agent_path: the agents the interrupt came through, from the snapshot's agent down to
            the one whose tool raised it (one name for an agent's own interrupt; more for a
            sub-agent's, surfaced by delegation: :mod:`interlock.agents._delegation`).
        part: the paused tool request itself.
    """

    snapshot_id: str
    session_id: str
    agent: str | None
    tool: str
    ref: str | None
    input: Any
    data: Any
    is_hold: bool
    created_at: datetime
    age: timedelta
    tenant: str | None = None
    in_doubt: bool = False
    idempotency_key: str | None = None
    attempts: int | None = None
    agent_path: tuple[str, ...] = ()
    part: ToolRequestPart = field(repr=False, compare=False)

    @property
    def label(self) -> str:
        """``tool#ref`` (or just ``tool`` without a ref)."""
        return f"{self.tool}#{self.ref}" if self.ref else self.tool

    @property
    def position(self) -> tuple[datetime, str]:
        """Where the item sorts in :meth:`Inbox.pending` (``after=`` of the next page)."""
        return (self.created_at, self.snapshot_id)

    def data_as(self, tp: type[T]) -> T:
        """The interrupt data validated as ``tp`` (a pydantic model, dataclass, TypedDict, ...).

        Raises :class:`~interlock.errors.InvalidArgumentError` naming each field that does not fit.
        """
        return data_as(tp, self.data, self.tool)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the time as ISO 8601, the age in seconds)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("part", "age")}
        return out | {"created_at": self.created_at.isoformat(), "age_seconds": round(self.age.total_seconds(), 3)}


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditAnswer:
    """One answered call in an audit entry, as it was decided.

    Attributes:
        kind: the verb, ``"respond"`` or ``"restart"``; ``"vote"`` for a quorum vote, ``"extend"`` for a
            deadline extension (:func:`vote_entries`).
        decision: ``"approve"``/``"deny"`` for an explicit decision (an approval hold, the
            inbox's approve/reject, a tool's declared rule), else ``None``: never guessed.
        payload: a restart's resume payload, as sent (without the approval marker).
        output: a respond's output.
        reason: a rejection's reason, when the tool's resume payload has no field for it.
        policy: the digest of the answer policy the call was asked under (``None``: none).
    """

    kind: str
    name: str
    ref: str | None
    decision: DecisionLabel | None = None
    payload: Any = None
    output: Any = None
    reason: str | None = None
    policy: str | None = None

    @property
    def approved(self) -> bool | None:
        """``True`` for an approval, ``False`` for a denial, ``None`` when no one said either."""
        return None if self.decision is None else self.decision == "approve"

    @property
    def label(self) -> str:
        """``name#ref`` (or just ``name`` without a ref)."""
        return f"{self.name}#{self.ref}" if self.ref else self.name


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditEntry:
    """One resume of a session: the snapshot it wrote, the one it answered, who answered, when, and what."""

    snapshot_id: str
    parent_id: str | None
    session_id: str
    agent: str | None
    by: Any
    at: datetime | None
    finish_reason: str | None
    respond: list[AuditAnswer]
    restart: list[AuditAnswer]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the time as ISO 8601; an answer's ``reason`` only when it has one)."""
        out: dict[str, Any] = asdict(self) | {"at": self.at.isoformat() if self.at else None}
        for kind in ("respond", "restart"):
            rows: list[dict[str, Any]] = out[kind]
            out[kind] = [
                {k: v for k, v in row.items() if k not in ("reason", "policy") or v is not None} for row in rows
            ]
        return out

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> AuditEntry | None:
        """The audit entry a resumed snapshot records (``metadata["resume"]``), or ``None``.

        Records written before decisions were recorded (``approved: true/false``) read as
        ``approve`` for ``true`` (only the approval marker set it) and no decision for
        ``false`` (it was set for every ordinary restart too).
        """
        record: Any = (snap.metadata or {}).get("resume")
        return _entry_of(snap, record) if is_object(record) else None


def vote_entries(snap: Snapshot) -> list[AuditEntry]:
    """The quorum votes cast on a snapshot's interrupts and its deadline extensions, one audit entry each.

    A vote (``metadata.votes``) is one ``vote`` answer: who voted (the identity's name), when,
    approve or deny, under which answer policy (its digest); the resume the last one made has its
    own entry. An extension (``metadata.extended``) is one ``extend`` answer whose ``output`` is
    ``{from, to}``.
    """
    entries: list[AuditEntry] = []
    for key, kind in ((md.VOTES, "vote"), (md.EXTENDED, "extend")):
        found: Any = (snap.metadata or {}).get(key)
        for call, rows in (found if is_object(found) else {}).items():
            for row in rows if is_array(rows) else []:
                if is_object(row):
                    entries.append(_marked(snap, str(call), kind, row))
    return entries


def _marked(snap: Snapshot, call: str, kind: str, row: dict[str, Any]) -> AuditEntry:
    name, _, ref = call.partition("#")
    at: Any = row.get("at")
    with contextlib.suppress(TypeError, ValueError):
        at = datetime.fromisoformat(at)
    policy = row.get("digest", row.get("policy"))
    answer = AuditAnswer(
        kind=kind,
        name=name,
        ref=ref or None,
        decision=_decision(row),
        output={"from": row.get("from"), "to": row.get("to")} if kind == "extend" else None,
        policy=policy if isinstance(policy, str) else None,
    )
    return AuditEntry(
        snapshot_id=snap.snapshot_id,
        parent_id=snap.parent_id,
        session_id=snap.session_id,
        agent=agent_of(snap),
        by=row.get("by"),
        at=at if isinstance(at, datetime) else None,
        finish_reason="voted" if kind == "vote" else "extended",
        respond=[],
        restart=[answer],
    )


def agent_of(snap: Snapshot) -> str | None:
    """The agent a snapshot names (``metadata["agent"]``), if any."""
    name = (snap.metadata or {}).get("agent")
    return name if isinstance(name, str) else None


def pending_item(entry: OpenInterrupt, now: datetime, tenant: str | None, agent: str | None) -> PendingInterrupt:
    """The inbox item of an open interrupt, as of ``now``."""
    part = entry.part
    return PendingInterrupt(
        snapshot_id=entry.snapshot_id,
        session_id=entry.session_id,
        agent=agent,
        tool=part.name,
        ref=part.ref,
        input=part.input,
        data=part.meta(md.INTERRUPT),
        is_hold=md.is_hold(part),
        created_at=entry.created_at,
        age=now - entry.created_at,
        tenant=tenant,
        **_doubt(part),
        agent_path=tuple(n for n in (agent, *md.agent_path(part)) if n is not None),
        part=part,
    )


def _doubt(part: ToolRequestPart) -> dict[str, Any]:
    """``in_doubt``, ``idempotency_key`` and ``attempts`` of a paused call (as its interrupt data says)."""
    if not md.is_in_doubt(part):
        return {}
    found = part.meta(md.INTERRUPT)
    data = found if is_object(found) else {}
    key, attempts = data.get("idempotencyKey"), data.get("attempts")
    return {
        "in_doubt": True,
        "idempotency_key": key if isinstance(key, str) else None,
        "attempts": attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else None,
    }


def _entry_of(snap: Snapshot, record: dict[str, Any]) -> AuditEntry:
    def answers(kind: str) -> list[AuditAnswer]:
        rows: Any = record.get(kind)
        found = [r for r in rows if is_object(r)] if is_array(rows) else []
        return [
            AuditAnswer(
                kind=kind,
                name=str(r.get("name")),
                ref=r.get("ref"),
                decision=_decision(r),
                payload=r.get("payload"),
                output=r.get("output"),
                reason=r.get("reason") if isinstance(r.get("reason"), str) else None,
                policy=r.get("policy") if isinstance(r.get("policy"), str) else None,
            )
            for r in found
        ]

    at: Any = record.get("at")
    with contextlib.suppress(TypeError, ValueError):
        at = datetime.fromisoformat(at)
    return AuditEntry(
        snapshot_id=snap.snapshot_id,
        parent_id=snap.parent_id,
        session_id=snap.session_id,
        agent=agent_of(snap),
        by=record.get("by"),
        at=at if isinstance(at, datetime) else None,
        finish_reason=snap.finish_reason,
        respond=answers("respond"),
        restart=answers("restart"),
    )


def _decision(row: dict[str, Any]) -> DecisionLabel | None:
    label = row.get("decision")
    if label in ("approve", "deny"):
        return label
    return "approve" if row.get("approved") is True else None  # an old record: only ``true`` was explicit


class ResumableAgent(Protocol):
    """What the inbox needs of an agent (an :class:`~interlock.Agent` or a :class:`~interlock.RemoteAgent`)."""

    name: str

    async def run(
        self, *, resume: Resume | None = None, snapshot_id: str | None = None, context: dict[str, Any] | None = None
    ) -> AgentOutput: ...

    async def get_snapshot(
        self, snapshot_id: str | None = None, *, session_id: str | None = None, context: dict[str, Any] | None = None
    ) -> Snapshot: ...
