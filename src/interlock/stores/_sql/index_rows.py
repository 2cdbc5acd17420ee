"""What both SQL stores share about their leaf rows and their index of open interrupts.

Each SQL store keeps two tables beside its snapshots, written in the transaction of every
snapshot write and delete:

* **leaves**: one row per leaf of a session (a snapshot no snapshot of its session names
  as its parent), so :meth:`~interlock.stores.SnapshotStore.latest` reads a session's
  leaves, never its rows;
* **open interrupts**: one row per call waiting for an answer
  (:mod:`interlock.records._interrupt_index`), with what a listing filters and sorts on, and the
  paused tool request itself, so a listing loads nothing else.

:func:`plan` says what one snapshot write changes in them (the same decision in both
stores), :func:`page_sql` builds a listing's query, and :func:`entry_values` /
:func:`entry_of` are an entry's columns both ways.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from ..._stored_messages import stored_part
from ...errors import DataLossError
from ...parts import ToolRequestPart, part_to_json
from ...records._interrupt_index import InterruptQuery, OpenInterrupt, waits
from ...records._sessions import Snapshot
from .row_codec import corrupt, dumps, from_us, loads, to_us

ENTRY_COLUMNS = (
    "snapshot_id",
    "position",
    "session_id",
    "agent",
    "tool",
    "ref",
    "created_us",
    "deadline_us",
    "in_doubt",
    "claimed_by",
    "claim_until_us",
    "part",
)
"""An open interrupt's columns (besides ``tenant``), in the order :func:`entry_of` reads them."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What one snapshot write changes in the leaves and the index.

    Attributes:
        unlink: the old parent, when the write moved the row away from it (it may be a
            leaf again, and wait again): re-read it.
        drop_parent_leaf: the new parent, which has a child now.
        add_leaf: the row is new: a leaf, unless a row of its session already names it as parent.
        drop_parent_entries: the parent, whose session went on (the row is ``completed``).
        own_entries: rewrite the row's own entries (its turn paused, or did).
    """

    unlink: str | None
    drop_parent_leaf: str | None
    add_leaf: bool
    drop_parent_entries: str | None
    own_entries: bool


def plan(before: tuple[str | None, str, str | None] | None, new: Snapshot) -> Plan:
    """The plan for writing ``new`` over a row whose ``(parent_id, status, finish_reason)`` was ``before``.

    ``before`` is ``None`` for a new row.
    """
    old_parent, old_status, old_finish = before if before is not None else (None, "", None)
    moved = before is None or old_parent != new.parent_id
    completes = new.status == "completed" and (moved or old_status != "completed")
    return Plan(
        unlink=old_parent if moved and old_parent is not None else None,
        drop_parent_leaf=new.parent_id if moved else None,
        add_leaf=before is None,
        drop_parent_entries=new.parent_id if completes else None,
        own_entries=new.finish_reason == "interrupted" or old_finish == "interrupted",
    )


def own_entries_change(old: Snapshot | None, new: Snapshot, same_messages: bool) -> str:
    """How a write of ``new`` over ``old`` (decoded from the row it replaces) changes the row's own entries.

    For a write whose :class:`Plan` says ``own_entries``: ``"none"`` when neither waits (it had
    no entries and gets none), ``"claim"`` when both wait on the same calls (same messages,
    ``same_messages``; same session, parent, creation time and agent) so that only the entries'
    claim columns may differ (a claim, or its release), ``"all"`` otherwise (rewrite them).
    A new row (``old`` ``None``) is ``"all"``.
    """
    if old is None:
        return "all"
    before, after = waits(old), waits(new)
    if not before and not after:
        return "none"
    if (
        before
        and after
        and same_messages
        and old.parent_id == new.parent_id
        and old.session_id == new.session_id
        and old.created_at == new.created_at
        and old.agent == new.agent
    ):
        return "claim"
    return "all"


def page_sql(
    table: str,
    query: InterruptQuery,
    mark: Callable[[str], str],
    created_of: tuple[str, Callable[[str], object]] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The listing's ``SELECT`` (filters, order and limit in the query) and its named parameters.

    ``mark`` writes a named placeholder (``:name`` for SQLite, ``%(name)s`` for psycopg).
    ``created_of``: for an index keyed by ``created_us`` before ``snapshot_id`` (SQLite's), the
    snapshot table and how it stores an id; a listing of one snapshot's entries then also names
    their ``created_us``, the snapshot row's (an entry's is its snapshot's), so that it seeks.
    """
    q = query
    where = ["tenant = {tenant}", "(claim_until_us IS NULL OR claim_until_us <= {now})"]
    args: dict[str, Any] = {"now": to_us(q.now)}
    for column, value in (("agent", q.agent), ("tool", q.tool), ("session_id", q.session_id)):
        if value is not None:
            where.append(f"{column} = {{{column}}}")
            args[column] = value
    if q.snapshot_id is not None:
        where.append("snapshot_id = {snapshot_id}")
        args["snapshot_id"] = q.snapshot_id
        if created_of is not None:
            snapshots, stored_id = created_of
            where.append(
                f"created_us = (SELECT created_us FROM {snapshots} WHERE tenant = {{tenant}} AND snapshot_id = {{key}})"
            )
            args["key"] = stored_id(q.snapshot_id)
    if q.in_doubt is not None:
        where.append("in_doubt = {in_doubt}")
        args["in_doubt"] = int(q.in_doubt)
    if q.created_before is not None:
        where.append("created_us <= {created_before}")
        args["created_before"] = to_us(q.created_before)
    if q.created_after is not None:
        where.append("created_us > {created_after}")
        args["created_after"] = to_us(q.created_after)
    if q.after is not None:
        where.append(f"(created_us, snapshot_id) {'<' if q.newest_first else '>'} ({{after_us}}, {{after_id}})")
        args |= {"after_us": to_us(q.after[0]), "after_id": q.after[1]}
    way = "DESC" if q.newest_first else "ASC"
    sql = (
        f"SELECT {', '.join(ENTRY_COLUMNS)} FROM {table} WHERE {' AND '.join(where)} "
        f"ORDER BY created_us {way}, snapshot_id {way}, position"
    )
    if q.limit is not None:
        sql += " LIMIT {limit}"
        args["limit"] = q.limit
    names = {name: mark(name) for name in ("tenant", *args)}
    return sql.format_map(names), args


def rest_sql(table: str, mark: Callable[[str], str]) -> str:
    """The entries of one snapshot after ``position`` (a page's last snapshot is never split).

    Parameters: ``tenant``, ``created_us`` (the last entry's: it names the snapshot's entries in
    SQLite's key, which leads with it), ``snapshot_id``, ``position``, ``now``; see :func:`rest_args`.
    """
    return (
        f"SELECT {', '.join(ENTRY_COLUMNS)} FROM {table} "
        f"WHERE tenant = {mark('tenant')} AND created_us = {mark('created_us')} "
        f"AND snapshot_id = {mark('snapshot_id')} AND position > {mark('position')} "
        f"AND (claim_until_us IS NULL OR claim_until_us <= {mark('now')}) ORDER BY position"
    )


def rest_args(tenant: str, last: OpenInterrupt, now: object) -> dict[str, Any]:
    """:func:`rest_sql`'s parameters after ``last``, a page's last entry (``now``: the page's)."""
    return {
        "tenant": tenant,
        "created_us": to_us(last.created_at),
        "snapshot_id": last.snapshot_id,
        "position": last.position,
        "now": now,
    }


def entry_values(tenant: str, entry: OpenInterrupt) -> dict[str, Any]:
    """An entry's column values (named as in :data:`ENTRY_COLUMNS`, plus ``tenant``)."""
    e = entry
    return {
        "tenant": tenant,
        "snapshot_id": e.snapshot_id,
        "position": e.position,
        "session_id": e.session_id,
        "agent": e.agent,
        "tool": e.tool,
        "ref": e.ref,
        "created_us": to_us(e.created_at),
        "deadline_us": None if e.deadline is None else to_us(e.deadline),
        "in_doubt": int(e.in_doubt),
        "claimed_by": e.claimed_by,
        "claim_until_us": None if e.claim_expires_at is None else to_us(e.claim_expires_at),
        "part": dumps(part_to_json(e.part)),
    }


def entry_of(found: tuple[Any, ...]) -> OpenInterrupt:
    """An entry from its columns (:data:`ENTRY_COLUMNS`' order)."""
    sid, position, session_id, agent, tool, ref, created, deadline, in_doubt, claimed_by, until, text = found
    data = loads(sid, "part of an open interrupt", text)
    try:
        part = stored_part(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise corrupt(sid, "its open interrupt's part is not a part", exc) from exc
    if not isinstance(part, ToolRequestPart):
        raise DataLossError(f"the open interrupt {position} of snapshot {sid!r} is not a tool request in the index")
    return OpenInterrupt(
        snapshot_id=cast(str, sid),
        session_id=cast(str, session_id),
        position=cast(int, position),
        agent=agent,
        tool=tool,
        ref=ref,
        part=part,
        created_at=from_us(created),
        deadline=None if deadline is None else from_us(deadline),
        in_doubt=bool(in_doubt),
        claimed_by=claimed_by,
        claim_expires_at=None if until is None else from_us(until),
    )
