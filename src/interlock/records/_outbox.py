"""The durable outbox: events a state change owes the outside world, written in its transaction.

A store keeps outbox rows (:class:`OutboxEvent`) beside its snapshots. A row is written
by :meth:`~interlock.stores.SnapshotStore.save_all` in the same transaction as the state
change it reports (``save_all(updates, events=[...])``), so a crash never drops one and
a rolled-back change never reports anything. Each row belongs to a *channel*:

* :data:`WEBHOOK`: a notification for :mod:`interlock.notify._webhooks` to deliver
  (``interrupt.created``, ``interrupt.answered``, ``interrupt.expired``,
  ``interrupt.escalated``, ``effect.in_doubt``);
* :data:`DEADLINE`: a timer, due when an interrupt's deadline passes, for
  :mod:`interlock.notify._deadlines` to act on.

Consumers take rows with a lease (:meth:`~interlock.stores.OutboxStore.outbox_claim`:
due, not settled, and not leased by anyone else, oldest first, across tenants), do the
work, and write the outcome back (:meth:`~interlock.stores.OutboxStore.outbox_settle`,
refused when the lease was lost). A consumer that dies holding a lease loses it after
``lease`` seconds and the row is taken again: delivery is at least once, and never by
two live consumers at a time.

Settled rows are kept for a while as a record (``interlock webhooks list``), then dropped:
:meth:`~interlock.stores.OutboxStore.outbox_prune` deletes a channel's rows settled before
a cutoff (:func:`is_prunable`), and each consumer loop prunes its own channel once an hour,
keeping :data:`KEEP_SETTLED` (7 days) unless told otherwise (:class:`Retention`). Pending
rows are never pruned, so the outbox holds what is owed plus a bounded record.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias, cast

from .._json import check_json
from ._evolve import fast_init
from ._sessions import new_id, utcnow

WEBHOOK = "webhook"
"""The channel of notifications delivered by :mod:`interlock.notify._webhooks`."""
DEADLINE = "deadline"
"""The channel of deadline timers acted on by :mod:`interlock.notify._deadlines`."""

OutboxStatus: TypeAlias = Literal["pending", "done", "failed"]
"""``pending``: still to do; ``done``: delivered (or acted on); ``failed``: given up after its attempts."""


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class OutboxEvent:
    """One outbox row.

    Attributes:
        id: unique id (also the webhook's delivery id, so receivers can drop duplicates).
        channel: :data:`WEBHOOK` or :data:`DEADLINE`.
        type: what happened (``interrupt.created``, ...; ``deadline.due`` for a timer).
        tenant: the tenant of the state change (``None``: none).
        data: the event's JSON payload (Genkit-style camelCase keys).
        group: who should hear of it: webhook endpoints subscribe to groups (an
            escalation names its group; ``None`` is the default group).
        created_at: when the state change committed.
        due_at: not to be taken before this time (a timer's deadline, a retry's backoff).
        status: see :data:`OutboxStatus`.
        attempts: how many times a consumer tried it.
        done_for: the webhook endpoints that already acknowledged it (retries skip them).
        last_error: why the last attempt failed.
        settled_at: when it became ``done`` or ``failed``.
        lease_holder: the consumer holding it now (set by ``outbox_claim``).
        lease_expires_at: when that lease lapses.
    """

    id: str
    channel: str
    type: str
    tenant: str | None = None
    data: dict[str, Any] = field(default_factory=dict[str, Any])
    group: str | None = None
    created_at: datetime = field(default_factory=utcnow)
    due_at: datetime | None = None
    status: OutboxStatus = "pending"
    attempts: int = 0
    done_for: tuple[str, ...] = ()
    last_error: str | None = None
    settled_at: datetime | None = None
    lease_holder: str | None = None
    lease_expires_at: datetime | None = None

    def evolve(self, **changes: Any) -> OutboxEvent:
        return replace(self, **changes)

    @property
    def due(self) -> datetime:
        """When the row may be taken: ``due_at``, or its creation."""
        return self.due_at or self.created_at

    @property
    def settled_or_due(self) -> datetime:
        """When a settled row settled (``done`` or ``failed``); when a pending one is due (what a prune compares)."""
        return (self.settled_at if self.status != "pending" else None) or self.due

    def body(self) -> dict[str, Any]:
        """What a webhook receiver gets: ``{id, type, createdAt, tenant, group, data}``."""
        return {
            "id": self.id,
            "type": self.type,
            "createdAt": self.created_at.isoformat(),
            "tenant": self.tenant,
            "group": self.group,
            "data": self.data,
        }

    def to_json(self) -> dict[str, Any]:
        """The row as JSON (how stores keep it); :meth:`from_json` reads it back."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value: Any = getattr(self, f.name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, tuple):
                value = list(cast(tuple[Any, ...], value))
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> OutboxEvent:
        """Read :meth:`to_json`'s output (raises ``KeyError``/``TypeError``/``ValueError`` when damaged)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in raw:
                continue
            value = raw[f.name]
            if f.name in _TIMES and value is not None:
                value = datetime.fromisoformat(value)
            elif f.name == "done_for":
                value = tuple(str(v) for v in cast(list[Any], value))
            values[f.name] = value
        if not isinstance(values.get("data"), dict):
            raise TypeError("an outbox row's data must be a JSON object")
        return cls(**values)


_TIMES = frozenset(("created_at", "due_at", "settled_at", "lease_expires_at"))


def new_event(
    channel: str,
    type: str,
    data: dict[str, Any],
    *,
    tenant: str | None,
    group: str | None = None,
    due_at: datetime | None = None,
) -> OutboxEvent:
    """A fresh, pending outbox row (its data checked to be JSON)."""
    check_json(data, f"the data of outbox event {type!r}")
    return OutboxEvent(id=new_id(), channel=channel, type=type, tenant=tenant, data=data, group=group, due_at=due_at)


def is_claimable(event: OutboxEvent, channel: str, now: datetime) -> bool:
    """The one rule of :meth:`~interlock.stores.OutboxStore.outbox_claim`: pending, due, and not leased now."""
    return (
        event.channel == channel
        and event.status == "pending"
        and event.due <= now
        and (event.lease_expires_at is None or event.lease_expires_at <= now)
    )


def is_prunable(event: OutboxEvent, channel: str, settled_before: datetime) -> bool:
    """The one rule of :meth:`~interlock.stores.OutboxStore.outbox_prune`: settled before ``settled_before``.

    A row of ``channel`` that is ``done`` or ``failed`` (never a pending one) and settled before
    the cutoff: nobody will take it again, and its record has been kept as long as asked.
    """
    return event.channel == channel and event.status != "pending" and event.settled_or_due < settled_before


def is_retryable(event: OutboxEvent, channel: str, ids: frozenset[str] | None) -> bool:
    """The one rule of :meth:`~interlock.stores.OutboxStore.outbox_retry`: a ``failed`` row of ``channel``.

    With ``ids``, only those rows; a ``done`` or pending row is never taken again by a retry.
    """
    return event.channel == channel and event.status == "failed" and (ids is None or event.id in ids)


def retries(events: Iterable[OutboxEvent], channel: str, ids: Iterable[str] | None, now: datetime) -> list[OutboxEvent]:
    """What :meth:`~interlock.stores.OutboxStore.outbox_retry` writes: each :func:`is_retryable` row, retried."""
    wanted = None if ids is None else frozenset(ids)
    return [retried(e, now) for e in events if is_retryable(e, channel, wanted)]


def retried(event: OutboxEvent, now: datetime) -> OutboxEvent:
    """``event`` given a fresh start: pending, due ``now``, no attempts yet, no lease.

    Its ``done_for`` stays (endpoints that acknowledged it are not posted to again), and so does
    its ``last_error``, until the next attempt replaces it.
    """
    return event.evolve(
        status="pending", attempts=0, due_at=now, settled_at=None, lease_holder=None, lease_expires_at=None
    )


KEEP_SETTLED = timedelta(days=7)
"""How long the delivery and deadline loops keep settled rows, by default (``keep_settled=``)."""


@dataclass
class Retention:
    """When a consumer loop drops its channel's settled rows: those settled ``keep`` ago, every ``every`` seconds.

    ``keep=None`` keeps them all. The first prune is due at once (a loop that restarts often still prunes).
    """

    keep: timedelta | None = KEEP_SETTLED
    every: float = 3600.0
    _next: float = field(default=0.0, repr=False)

    def cutoff(self) -> datetime | None:
        """The ``settled_before`` of a prune due now (and the next one scheduled); ``None`` if none is due."""
        now = time.monotonic()
        if self.keep is None or now < self._next:
            return None
        self._next = now + self.every
        return utcnow() - self.keep


def leased(event: OutboxEvent, holder: str, seconds: float, now: datetime) -> OutboxEvent:
    """``event`` leased to ``holder`` for ``seconds`` from ``now``."""
    return event.evolve(lease_holder=holder, lease_expires_at=now + timedelta(seconds=seconds))


def backoff(attempts: int, *, base: float = 1.0, cap: float = 3600.0) -> float:
    """Seconds to wait before attempt ``attempts + 1``: ``base * 2 ** (attempts - 1)``, at most ``cap``."""
    return min(cap, base * 2.0 ** min(max(attempts - 1, 0), 60))
