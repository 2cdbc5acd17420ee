"""What this store last read or wrote of each row, by row version: the guess that saves a save's locking read.

A save must run its updaters on the rows and journal entries as they are, locked until it
commits. Read ``FOR UPDATE`` first, that is a round trip of its own before the writes. But the
rows a save touches are usually ones this process has just read or written: the snapshot a
resume loaded and claims, the turn its claim holds, the journal entry its intent put. So the
store remembers, per row, what it last saw and that row version's ``xmin`` (the transaction
that wrote it: PostgreSQL never changes a row version in place, so an equal ``xmin`` is the
same row), and a save of known rows (and of ids it has never seen, guessed absent: a new
turn's row) runs its updaters on what it remembers and sends a :func:`guard` ahead of its writes,
all in one round trip with the commit. The guard locks the rows and entries as the locking read
would and fails the transaction (division by zero, SQLSTATE 22012: nothing else in the
store divides) unless each is the version guessed, or absent as guessed; nothing is written
then, and the save runs again the ordinary way (:class:`Stale`). An updater that raises on a
guess sends it the ordinary way too, so what it raises is about the rows as they are.

The cache is never trusted for what it says, only for what to guess: a row changed by any
other transaction (another process, a checkpoint of a dependent, a delete) has another
``xmin``, or none.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, LiteralString, cast

from .._sql.row_codec import Row
from ._schema import JOURNAL, TABLE


def locking(
    columns: LiteralString, table: LiteralString, key: LiteralString, name: LiteralString, count: int
) -> LiteralString:
    """Select ``columns`` of the tenant's rows whose ``key`` is argument ``name``'s, ``FOR UPDATE``, in key order.

    ``count``: how many values ``name`` has (one: the argument is the value, else a ``text[]``).
    Arguments ``tenant`` and ``name``. Each row is found by the primary key, whatever the
    statistics: the plan PostgreSQL caches for a prepared statement is made without them while
    the tables are new, and then prices ``key = ANY(...)`` (after ``tenant`` in the key) as ten
    lookups, dearer than reading every row of the tenant in key order and filtering them, which
    it did until the next ``ANALYZE`` (~0.4 ms of server CPU per lock at ~700 rows). So one value
    is compared with ``=``, and several are looked up one by one, in key order (the lock order),
    by a lateral subquery the planner cannot fold into a join.
    """
    where = f"tenant = %(tenant)s AND {key}"
    if count == 1:
        return f"SELECT {columns} FROM {table} WHERE {where} = %({name})s FOR UPDATE"
    return (
        f"SELECT l.* FROM (SELECT k FROM unnest(%({name})s::text[]) AS k ORDER BY k) AS i CROSS JOIN LATERAL "
        f"(SELECT {columns} FROM {table} WHERE {where} = i.k OFFSET 0 FOR UPDATE) AS l"
    )


def one_or_all(values: list[str]) -> str | list[str]:
    """The argument :func:`locking` takes for ``values``: the value itself if there is one."""
    return values[0] if len(values) == 1 else values


@cache
def guard(ids: int, keys: int) -> LiteralString:
    """The guard of a guessed save of ``ids`` rows and ``keys`` entries (none of one kind: that part is left out).

    Locks a guessed save's rows and entries (in the locking read's order) and fails unless each is the version
    guessed. ``rows`` and ``entries`` are ``"<id> <xmin>"`` for those guessed present (an ``xmin`` is digits, so
    the pair is unambiguous); every other id and key of ``ids`` and ``keys`` was guessed absent. Answers the
    transaction's id, the ``xmin`` of every row it writes. Arguments: ``tenant``, ``ids`` (the id itself if one),
    ``keys`` (the same), ``rows`` and ``entries``.
    """
    parts: list[tuple[LiteralString, LiteralString, LiteralString]] = []
    if ids:
        rows = locking("snapshot_id || ' ' || xmin::text AS seen", TABLE, "snapshot_id", "ids", ids)
        parts.append(("locked_rows", rows, "rows"))
    if keys:
        entries = locking("key || ' ' || xmin::text AS seen", JOURNAL, "key", "keys", keys)
        parts.append(("locked_entries", entries, "entries"))
    ctes = ", ".join(f"{cte} AS MATERIALIZED ({select})" for cte, select, _ in parts)
    checks = " AND ".join(
        f"(SELECT count(*) FILTER (WHERE seen = ANY(%({arg})s::text[])) = cardinality(%({arg})s::text[]) "
        f"AND count(*) = cardinality(%({arg})s::text[]) FROM {cte})"
        for cte, _, arg in parts
    )
    return f"WITH {ctes} SELECT pg_current_xact_id()::xid::text, 1 / ({checks})::int"


XID = "SELECT pg_current_xact_id()::xid::text"
"""The transaction's id (the ``xmin`` of the rows it writes), sent with the locking read of an ordinary save."""
LIMIT = 4096
"""How many rows (and, apart, journal entries) the store remembers."""


class Stale(Exception):
    """An updater raised on a guessed row: the save runs again on the rows as they are."""


@dataclass(eq=False)
class Guess:
    """Whether a save may still guess (it stops after one stale guess)."""

    on: bool


def row_of(found: tuple[Any, ...] | list[Any]) -> Row:
    """The :data:`~._schema.COLUMNS` of a row as stored (offsets after ``created_us``) as the shared codec's row."""
    (sid, session_id, parent, base, keep, tail, mrev, base_mrev, state_session, custom, artifacts) = found[:11]
    (created, updated, heartbeat, status, finish, error, version, claimed_by, claimed, metadata) = found[11:21]
    return _row(
        Row,
        (
            sid,
            session_id,
            0,
            parent,
            base,
            keep,
            tail,
            mrev,
            base_mrev,
            state_session,
            custom,
            artifacts,
            created,
            None if updated is None else created + updated,
            None if heartbeat is None else created + heartbeat,
            status,
            finish,
            error,
            version,
            claimed_by,
            None if claimed is None else created + claimed,
            metadata,
        ),
    )


_row = cast("Callable[[type[Row], tuple[Any, ...]], Row]", tuple.__new__)  # pyright: ignore[reportUnknownMemberType]
"""Builds a :class:`Row` without the Python ``__new__`` a named tuple's class call runs (a row is read per save)."""


class Known:
    """The rows and journal entries last seen, each with its ``xmin``, least recently used dropped first.

    A remembered row keeps no tail (only whether it has one): its history is the chain cache's
    (:class:`~interlock.stores._sql.history.ChainCache`), by message revision.
    """

    def __init__(self) -> None:
        self.rows: OrderedDict[tuple[str, str], tuple[str, Row]] = OrderedDict()
        self.entries: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()

    def row(self, tenant: str, snapshot_id: str) -> tuple[str, Row] | None:
        return self.rows.get((tenant, snapshot_id))

    def entry(self, tenant: str, key: str) -> tuple[str, str] | None:
        return self.entries.get((tenant, key))

    def saw_row(self, tenant: str, row: Row, xmin: str) -> None:
        slot = (tenant, row.snapshot_id)
        self.rows[slot] = (xmin, row if row.tail is None else _row(Row, (*row[:6], "", *row[7:])))
        self.rows.move_to_end(slot)
        if len(self.rows) > LIMIT:
            self.rows.popitem(last=False)

    def saw_entry(self, tenant: str, key: str, text: str, xmin: str) -> None:
        slot = (tenant, key)
        self.entries[slot] = (xmin, text)
        self.entries.move_to_end(slot)
        if len(self.entries) > LIMIT:
            self.entries.popitem(last=False)

    def forget(self, tenant: str, snapshot_ids: Iterable[str] = (), keys: Iterable[str] = ()) -> None:
        for sid in snapshot_ids:
            self.rows.pop((tenant, sid), None)
        for key in keys:
            self.entries.pop((tenant, key), None)
