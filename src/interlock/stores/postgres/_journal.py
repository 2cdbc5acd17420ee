"""The PostgreSQL store's effect journal: one row per call's idempotency key (see :mod:`interlock.records._journal`).

An entry is JSON text in column ``entry``, beside the columns that find it (``session_id``,
``snapshot_id``) and the one that fences it (``attempt``). :func:`put` is one autocommitted
statement; :func:`update` runs in a save's transaction, on the entry :func:`lock` read
``FOR UPDATE`` with the save's other rows (one round trip for all of them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import LiteralString, cast

from ..._json_object import json_encoder
from ...errors import DataLossError
from ...records._journal import JournalEntry, superseded
from .. import JournalUpdater
from ._known import locking, one_or_all
from ._schema import JOURNAL
from ._wire import Answer
from ._wire import Wire as Conn

Locked = dict[str, str | None]
"""Keys → their entries' text as a save's transaction read (and locked) them (``None``: no entry)."""

_COLUMNS = "tenant, key, session_id, snapshot_id, attempt, entry"


@cache
def lock_sql(keys: int) -> LiteralString:
    """Read (and lock) a save's ``keys`` entries, each with its ``xmin``.

    Arguments ``tenant`` and ``keys`` (see :func:`~._known.locking`). A save with snapshot rows
    too locks both in one statement (``_tx``).
    """
    return locking("key, entry, xmin::text", JOURNAL, "key", "keys", keys)


_INSERT = f"INSERT INTO {JOURNAL} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
_UPDATE = f"""UPDATE {JOURNAL} SET key = %s, session_id = %s, snapshot_id = %s, attempt = %s, entry = %s
    WHERE tenant = %s AND key = %s"""
_PUT_FIRST = f"""INSERT INTO {JOURNAL} ({_COLUMNS})
    SELECT %s, %s, %s, %s, %s, %s WHERE set_config('synchronous_commit', %s, true) IS NOT NULL
    ON CONFLICT (tenant, key) DO NOTHING RETURNING xmin::text"""
_PUT_NEXT = f"""UPDATE {JOURNAL} SET attempt = %s, entry = %s WHERE tenant = %s AND key = %s AND attempt = %s
    AND set_config('synchronous_commit', %s, true) IS NOT NULL RETURNING xmin::text"""
_text = json_encoder(ensure_ascii=True, separators=(", ", ": "))
"""An entry's text: ``json.dumps``'s."""
PRIMARY_KEY = f"{JOURNAL}_pkey"
"""The constraint a concurrent first write of the same key violates (the save then runs again)."""


async def lock(con: Conn, tenant: str, keys: Sequence[str]) -> Answer | None:
    """Send the read of ``keys``' entries ``FOR UPDATE`` (its rows come with :func:`locked`)."""
    if not keys:
        return None
    unique = list(dict.fromkeys(keys))
    return await con.execute(lock_sql(len(unique)), {"tenant": tenant, "keys": one_or_all(unique)})


async def locked(cur: Answer | None, keys: Sequence[str]) -> tuple[Locked, dict[str, str]]:
    """The entries :func:`lock` read, by key (``None`` for a key without one), and their ``xmin``."""
    found: Locked = dict.fromkeys(keys)
    versions: dict[str, str] = {}
    if cur is not None:
        for key, raw, xmin in cast(list[tuple[str, str, str]], await cur.fetchall()):
            found[key] = raw
            versions[key] = xmin
    return found, versions


async def get(con: Conn, tenant: str, key: str) -> JournalEntry | None:
    cur = await con.execute(f"SELECT entry FROM {JOURNAL} WHERE tenant = %s AND key = %s", (tenant, key))
    found = await cur.fetchone()
    return None if found is None else _entry(found[0], key)


async def put(con: Conn, tenant: str, entry: JournalEntry, expect: int, durable: bool) -> tuple[str, str]:
    """Write ``entry`` if the stored attempt is ``expect`` (0: none), in one statement; else ABORTED.

    Returns the entry's text and ``xmin`` as written (for :mod:`._known`).

    ``durable=False`` commits it without waiting for the WAL flush: ``set_config(...,
    true)`` in the statement itself sets ``synchronous_commit`` for its own (implicit)
    transaction, so the write stays one round trip.
    """
    text = _written(entry)
    flush = "on" if durable else "off"
    if expect == 0:
        args = (tenant, entry.key, entry.session_id, entry.snapshot_id, entry.attempt, text, flush)
        cur = await con.execute(_PUT_FIRST, args)
    else:
        cur = await con.execute(_PUT_NEXT, (entry.attempt, text, tenant, entry.key, expect, flush))
    found = await cur.fetchone()
    if found is None:
        raise superseded(entry, await get(con, tenant, entry.key), expect)
    return text, cast(str, found[0])


async def update(con: Conn, tenant: str, key: str, update: JournalUpdater, found: Locked) -> str | None:
    """Apply ``update`` to the entry of ``key`` (as read ``FOR UPDATE`` in ``found``); write and return its text.

    The write is sent without waiting for its answer (a save pipelines its writes): a first
    entry for ``key`` written meanwhile by another transaction fails this one's insert on
    :data:`PRIMARY_KEY`, and the save runs again.
    """
    if key in found:
        raw = found.pop(key)
    else:  # a key updated twice in one save: the second sees the first's write
        cur = await con.execute(f"SELECT entry FROM {JOURNAL} WHERE tenant = %s AND key = %s FOR UPDATE", (tenant, key))
        row = await cur.fetchone()
        raw = None if row is None else cast(str, row[0])
    new = update(None if raw is None else _entry(raw, key))
    if new is None:
        return None
    text = _written(new)
    values = (tenant, new.key, new.session_id, new.snapshot_id, new.attempt, text)
    if raw is None:
        await con.execute(_INSERT, values)
    else:
        await con.execute(_UPDATE, (*values[1:], tenant, key))
    return text if new.key == key else None


async def entries(con: Conn, tenant: str, session_id: str | None) -> list[JournalEntry]:
    if session_id is None:
        cur = await con.execute(f"SELECT key, entry FROM {JOURNAL} WHERE tenant = %s", (tenant,))
    else:
        sql = f"SELECT key, entry FROM {JOURNAL} WHERE tenant = %s AND session_id = %s"
        cur = await con.execute(sql, (tenant, session_id))
    found = [_entry(raw, key) for key, raw in await cur.fetchall()]
    return sorted(found, key=lambda e: (e.started_at, e.key))


def _entry(raw: object, key: str) -> JournalEntry:
    """The entry ``raw`` holds: the one this process wrote as ``raw`` (:func:`_written`), or parsed."""
    found = _texts.get(raw) if type(raw) is str else None
    if found is not None:
        return found
    try:
        return JournalEntry.from_json(json.loads(cast(str, raw)))
    except (TypeError, ValueError, KeyError) as exc:
        raise DataLossError(f"the journal entry {key!r} of the PostgreSQL store is damaged: {exc}") from None


def _written(entry: JournalEntry) -> str:
    """``entry``'s text, remembered with it: the same text read back (the next update's) is not parsed again.

    Entries are immutable and a text stands for one entry, whichever store or tenant reads it.
    """
    text = _text(entry.to_json())
    _texts[text] = entry
    if len(_texts) > _TEXTS:
        del _texts[next(iter(_texts))]
    return text


_texts: dict[str, JournalEntry] = {}
"""The entries this process wrote last, by their text (oldest first)."""
_TEXTS = 1024
