"""The index of open interrupts: which calls wait for an answer, one entry each, kept by every store.

A store keeps one :class:`OpenInterrupt` per call that waits, written in the transaction
that writes its snapshot, so listing the inbox reads the index and nothing else
(:meth:`~interlock.stores.InterruptIndex.open_interrupts`). A snapshot's calls wait when:

* its turn paused: it is ``completed`` with finish reason ``interrupted``;
* no answer committed (:func:`interlock.records.snapshots.claim_state` is not ``answered``); a
  resume holding the claim keeps the entries, with the claim's expiry, so a listing at
  time ``now`` leaves out those held then (:meth:`OpenInterrupt.answerable`);
* its session did not go on from it: no ``completed`` snapshot of the same session names
  it as its parent (a failed, aborted or running resume does not count).
* it is not a sub-agent's turn run by a delegation (``metadata.delegatedBy``): those calls
  wait, surfaced, in the delegating session's snapshot (:mod:`interlock.agents._delegation`), and are
  indexed there, once.

:func:`entries_of` is that rule for one snapshot (the caller checks the last point; :func:`waits`
says whether it yields anything, without building the entries), and
:class:`InterruptQuery` what a listing filters on, and how it pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from .. import metadata as md
from ..parts import ToolRequestPart
from ._sessions import Snapshot
from .snapshots import claim_state


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenInterrupt:
    """One call waiting for an answer, as the index holds it.

    Attributes:
        position: the call's place among its snapshot's interrupts (0, 1, ...).
        part: the paused tool request, with its interrupt data.
        created_at: when the paused turn's snapshot was created (listings sort on it).
        deadline: the call's ``metadata.deadline.expiresAt``, if it has one.
        claimed_by: the resume holding (or that held) the claim, else ``None``.
        claim_expires_at: when that claim lapses; ``None`` when nobody claimed the call.
    """

    snapshot_id: str
    session_id: str
    position: int
    agent: str | None
    tool: str
    ref: str | None
    part: ToolRequestPart
    created_at: datetime
    deadline: datetime | None = None
    in_doubt: bool = False
    claimed_by: str | None = None
    claim_expires_at: datetime | None = None

    def answerable(self, now: datetime) -> bool:
        """True when a resume may claim the call at ``now``: nobody holds it (or the holder's lease lapsed)."""
        return self.claim_expires_at is None or now >= self.claim_expires_at


@dataclass(frozen=True, kw_only=True, slots=True)
class InterruptQuery:
    """What a listing of open interrupts takes (:meth:`~interlock.stores.InterruptIndex.open_interrupts`).

    Attributes:
        now: entries whose claim is held at ``now`` are left out.
        created_before: only snapshots created at or before it (the inbox's ``older_than``).
        created_after: only snapshots created after it (``newer_than``).
        newest_first: the order (by ``created_at``, then snapshot id, then position).
        after: ``(created_at, snapshot_id)`` of the previous page's last snapshot.
        limit: at most this many entries, except that a snapshot's entries are never split
            across pages (the last snapshot's come whole); ``None``: all; 0 or less: none.
    """

    now: datetime
    agent: str | None = None
    tool: str | None = None
    session_id: str | None = None
    snapshot_id: str | None = None
    in_doubt: bool | None = None
    created_before: datetime | None = None
    created_after: datetime | None = None
    newest_first: bool = False
    after: tuple[datetime, str] | None = None
    limit: int | None = None

    def admits(self, entry: OpenInterrupt) -> bool:
        """The query's filters, applied to one entry (how the memory store filters; SQL stores say it in SQL)."""
        e = entry
        return (
            e.answerable(self.now)
            and self.agent in (None, e.agent)
            and self.tool in (None, e.tool)
            and self.session_id in (None, e.session_id)
            and self.snapshot_id in (None, e.snapshot_id)
            and self.in_doubt in (None, e.in_doubt)
            and (self.created_before is None or e.created_at <= self.created_before)
            and (self.created_after is None or e.created_at > self.created_after)
            and (self.after is None or self.beyond((e.created_at, e.snapshot_id)))
        )

    def beyond(self, key: tuple[datetime, str]) -> bool:
        """True when a snapshot at ``key`` sorts past :attr:`after` in the listing's order."""
        assert self.after is not None
        return key < self.after if self.newest_first else key > self.after

    @property
    def empty(self) -> bool:
        """True when the page is empty whatever is stored (a limit of 0 or less)."""
        return self.limit is not None and self.limit <= 0

    def page(self, entries: list[OpenInterrupt]) -> list[OpenInterrupt]:
        """Sort admitted entries in the listing's order and cut the page (never inside a snapshot)."""
        if self.empty:
            return []
        entries = sorted(entries, key=lambda e: e.position)  # then stably by snapshot: positions stay ascending
        entries.sort(key=lambda e: (e.created_at, e.snapshot_id), reverse=self.newest_first)
        if self.limit is None or len(entries) <= self.limit:
            return entries
        last = entries[self.limit - 1].snapshot_id
        end = self.limit
        while end < len(entries) and entries[end].snapshot_id == last:
            end += 1
        return entries[:end]


_ANY_TIME = datetime.min.replace(tzinfo=UTC)


def waits(snap: Snapshot) -> bool:
    """True when ``snap``'s turn paused, unanswered, in its own session: it may have index entries.

    The rule of :func:`entries_of` without building them (the caller checks that the session
    did not go on from it): a paused turn, no answer committed, not a delegated sub-agent's.
    """
    # any time will do: whether the claim is answered does not depend on the clock (none is read)
    if snap.status != "completed" or snap.finish_reason != "interrupted" or claim_state(snap, _ANY_TIME) == "answered":
        return False
    return md.DELEGATED_BY not in (snap.metadata or {})  # a delegated turn: indexed under the delegating session


def entries_of(snap: Snapshot) -> list[OpenInterrupt]:
    """The index entries of ``snap``, assuming its session did not go on from it (see the module docs)."""
    if not waits(snap):
        return []
    agent = snap.agent
    return [
        OpenInterrupt(
            snapshot_id=snap.snapshot_id,
            session_id=snap.session_id,
            position=position,
            agent=agent,
            tool=part.name,
            ref=part.ref,
            part=part,
            created_at=snap.created_at,
            deadline=_deadline(part),
            in_doubt=md.is_in_doubt(part),
            claimed_by=snap.claimed_by,
            claim_expires_at=snap.claim_expires_at,
        )
        for position, part in enumerate(cast(list[ToolRequestPart], snap.interrupts))
    ]


def _deadline(part: ToolRequestPart) -> datetime | None:
    found: Any = (md.deadline_of(part) or {}).get("expiresAt")
    if not isinstance(found, str):
        return None
    try:
        return datetime.fromisoformat(found)
    except ValueError:
        return None
