"""How an outbox row's columns are made from an event and read back: one codec for the SQL stores."""

from __future__ import annotations

import json
from datetime import datetime
from typing import cast

from ...errors import DataLossError
from ...records._outbox import OutboxEvent


def us(at: datetime | None) -> int | None:
    """A time as integer microseconds since the epoch (how the outbox tables store times)."""
    return None if at is None else round(at.timestamp() * 1_000_000)


def row(event: OutboxEvent) -> tuple[object, ...]:
    """The mutable columns of ``event``: status, due, lease holder, lease expiry, the event as JSON.

    ``due_us`` is when a pending row is due (what a claim compares) and when a settled one
    settled (what a prune compares): :attr:`OutboxEvent.settled_or_due`.
    """
    text = json.dumps(event.to_json(), ensure_ascii=False, allow_nan=False)
    return (event.status, us(event.settled_or_due), event.lease_holder, us(event.lease_expires_at), text)


def event(raw: object, seq: object, store: str) -> OutboxEvent:
    """The event a row's JSON holds; a row that does not parse is ``DATA_LOSS`` naming ``store``."""
    try:
        return OutboxEvent.from_json(json.loads(cast(str, raw)))
    except (TypeError, ValueError, KeyError) as exc:
        raise DataLossError(f"outbox row {seq} of the {store} store is damaged: {exc}") from None
