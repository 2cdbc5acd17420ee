"""The SQLite store's file layout: its tables and its SQL (values: :mod:`._codec` and the shared row codec).

Tables
------
``interlock_snapshots`` holds one row per ``(tenant, snapshot_id)`` (``''`` stands for the
``None`` tenant). Storage is linear in conversation length: a row does not hold the whole
history, only what it adds to another row's:

* ``keep``: how many of the base's messages are kept as this row's prefix; ``0`` means a
  full checkpoint (no base);
* the base: the row named by ``base_id``, or, when ``base_id`` is ``NULL`` (the usual
  case, which saves an id and an index entry per row), the parent ``parent_id``, which
  is then in the same session;
* ``tail``: JSON (Genkit camelCase, via :mod:`interlock._wire`) of the messages after the
  prefix; ``NULL`` when the snapshot has no state at all;
* ``mrev``: a random id of this row's message content, changed whenever its messages
  change; ``base_mrev`` is the base's ``mrev`` when this row was written.

So a row's messages are ``messages(base)[:keep] + tail``. A row's messages only change
after every row based on it has been rewritten as a full checkpoint (the same happens
before a delete), so a row's prefix never changes under it. Custom state, artifacts,
error and metadata are JSON columns (``state_session`` is ``NULL`` when the state's
session id is the row's, else JSON).

A session's leaves are its rows whose ``leaf`` flag is set; the session index
``(session, leaf, parent_id)`` (:data:`TREE`) finds them, and a snapshot's children. The index of
open interrupts has its own table (:mod:`._index`).

``interlock_sessions`` interns session ids: each ``(tenant, session_id)`` gets a small
integer ``id``, and a snapshot row names its session by that integer (column
``session``), so neither the row nor the session index repeats the session's id. A
session's entry is deleted with its last snapshot.

Compact values
--------------
Per-row bookkeeping is kept small, since a turn's own messages are often only a few
hundred bytes:

* ids (``snapshot_id``, ``parent_id``, ``base_id``, ``claimed_by`` and the interned
  ``session_id``) that are canonical lowercase UUID strings, as :func:`~interlock.records.new_id`
  makes them, are stored as their 16 bytes (a BLOB) instead of 36 characters of text;
  any other id is stored as TEXT, unchanged. So every id reads back as exactly the string
  written, and the two kinds never collide (a BLOB never equals a TEXT);
* ``created_us`` is integer microseconds since the Unix epoch (exact, and read back as a
  timezone-aware UTC datetime); ``updated_us``, ``heartbeat_us`` and ``claimed_us`` are
  microseconds *after* ``created_us`` (usually 0 or small, so one to four bytes);
* ``status`` and ``finish_reason`` hold the small integer code of a common value (see
  :data:`~._codec.WORDS`: 0 is ``completed``, 1 is ``stop``, ...), else the TEXT itself;
* ``NULL`` stands for every absent value, and costs one header byte (so do the integers
  0 and 1).

The snapshot table keeps its rowid (and so a separate primary-key index): as a ``WITHOUT
ROWID`` table, any row over about 1 KB (most turns with a tool result) would spill into
overflow pages, which costs far more than the index saves. The index of open interrupts,
whose rows are small, is ``WITHOUT ROWID`` (:mod:`._index`); the journal keeps its rowid
(:mod:`._journal`).

Pages per interrupt cycle
-------------------------
Each page a transaction changes is one frame in the WAL (written, then flushed by the next
fsync), so the layout sets a cycle's I/O. A cycle in a new session (pause, claim, resume)
writes 19 (20.25 on average over ``bench/sqlite_pages.py``'s cycles, which count the pages
allocated as tables grow; wave 1, without the journal and the index of open interrupts, wrote 9):

* the call's intent (4, before the tool's body): the journal row and its entries in the
  indexes by key, by session and by snapshot (:mod:`._journal`);
* the pause (7): the snapshot row (a leaf: its flag set), its primary key and its session index
  entry (3); the new session's row and its ``(tenant, session_id)`` key (2, a session's first row
  only); the open interrupt (1: its table is keyed in its listing's order, see :mod:`._index`);
  the journal entry, now ``interrupted`` (1);
* the claim (3): the claim columns of the snapshot row and of the open interrupt, in place (no
  index entry changes: see :data:`UPDATE_BOOKKEEPING_IN_PLACE`), and the journal's new attempt;
* the call's outcome (1): the journal row;
* the resume's commit (4): the answered row (no longer a leaf) and the new one (a leaf), on one
  page (1); the new row's primary key (1) and the two rows' session index entries, on one page
  (1); the open interrupt deleted (1).

What each page buys: the intent's 4 and the outcome's 1 are the effect journal (a call's body
never runs again unnoticed); the journal's page in the pause and in the claim record the
interrupt and the new attempt with the rows they belong to; the open interrupt's page in each
of the three is the inbox's index (listing without reading snapshots); the rest are what wave 1
wrote too.

Before version 7 the leaves were rows of a table of their own: a page more in the pause and in
the resume's commit. With the flag in the row, a parent's change rides on pages its child's
write changes anyway: the row's, when the two share a page (a paused row and its resume's, whose
commit writes both; a turn and the next in a short session), and the session index entry's,
when the session's entries fit a page. Otherwise it writes a page, as that table did.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TypeVar

from ...errors import InvalidArgumentError

_T = TypeVar("_T")

TABLE = "interlock_snapshots"
SESSIONS = "interlock_sessions"
MAX_CHAIN = 1_000_000
"""A base chain longer than this is taken as corrupt (a cycle)."""

# Id columns are declared BLOB (BLOB affinity: values are stored as given, never
# converted), since they hold TEXT or a UUID's 16 bytes; so are status and finish_reason,
# which hold TEXT or an integer code.
SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {SESSIONS} (
        id          INTEGER PRIMARY KEY,
        tenant      TEXT    NOT NULL,
        session_id  BLOB    NOT NULL,
        UNIQUE (tenant, session_id)
    )""",
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        tenant        TEXT    NOT NULL,
        snapshot_id   BLOB    NOT NULL,
        session       INTEGER NOT NULL,  -- interlock_sessions.id
        parent_id     BLOB,
        base_id       BLOB,
        keep          INTEGER NOT NULL DEFAULT 0,
        tail          TEXT,
        mrev          INTEGER NOT NULL DEFAULT 0,
        base_mrev     INTEGER,
        state_session TEXT,
        custom        TEXT,
        artifacts     TEXT,
        created_us    INTEGER NOT NULL,
        updated_us    INTEGER,  -- µs after created_us
        heartbeat_us  INTEGER,  -- µs after created_us
        status        BLOB    NOT NULL,
        finish_reason BLOB,
        error         TEXT,
        version       INTEGER NOT NULL,
        claimed_by    BLOB,
        claimed_us    INTEGER,  -- µs after created_us
        metadata      TEXT,
        PRIMARY KEY (tenant, snapshot_id)
    )""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_base ON {TABLE} (tenant, base_id) WHERE base_id IS NOT NULL",
)
"""A new file's tables as version 1 had them, and the index on named bases; the migrations then bring it to the
current layout (:mod:`._migrate`: version 7 adds the ``leaf`` column and :data:`TREE`)."""
TREE = f"CREATE INDEX IF NOT EXISTS {TABLE}_tree ON {TABLE} (session, leaf, parent_id)"
"""The session index: a session's leaves (``leaf = 1``), and a snapshot's children (``leaf IN (0, 1) AND
parent_id = ?``, two seeks: see :func:`children`). Since a new row's entry is written anyway, its parent's
flag, on the same page in a short session, costs no page of its own."""


def children(session: str, parents: str) -> str:
    """The rows of ``session`` whose ``parent_id`` passes ``parents``: the one condition that finds children.

    ``parents`` is ``"= ?"`` or ``"IN (...)"``; both arguments are SQL (placeholders, never values). It
    names ``leaf IN (0, 1)`` so that :data:`TREE` finds them by seeks whatever their flag (without it, by
    a scan of the session's entries).
    """
    return f"session = {session} AND leaf IN (0, 1) AND parent_id {parents}"


BOOKKEEPING = (
    "parent_id",
    "state_session",
    "custom",
    "artifacts",
    "created_us",
    "updated_us",
    "heartbeat_us",
    "status",
    "finish_reason",
    "error",
    "version",
    "claimed_by",
    "claimed_us",
    "metadata",
)
"""The columns of :func:`~interlock.stores._sql.row_codec.bookkeeping`'s values, in its order."""
_CONTENT = ("session", "base_id", "keep", "tail", "mrev", "base_mrev")
_COLUMNS = ("snapshot_id", *_CONTENT, *BOOKKEEPING)
COLUMNS = ", ".join(_COLUMNS)
_UPDATED = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c not in ("snapshot_id", "session"))

SELECT_ROW = f"""SELECT s.snapshot_id, n.session_id, s.session, s.parent_id, s.base_id, s.keep, s.tail, s.mrev,
        s.base_mrev, s.state_session, s.custom, s.artifacts, s.created_us, s.updated_us, s.heartbeat_us, s.status,
        s.finish_reason, s.error, s.version, s.claimed_by, s.claimed_us, s.metadata
    FROM {TABLE} AS s LEFT JOIN {SESSIONS} AS n ON n.id = s.session
    WHERE s.tenant = ? AND s.snapshot_id = ?"""
"""Parameters: ``(tenant, snapshot_id)``."""
# The writes below take positional parameters (a named one costs SQLite's module a name lookup each).
UPSERT = f"""INSERT INTO {TABLE} (tenant, {", ".join(_COLUMNS)}, leaf)
    VALUES ({", ".join("?" * (1 + len(_COLUMNS)))},
        NOT EXISTS (SELECT 1 FROM {TABLE} WHERE {children("?", "= ?")}))
    ON CONFLICT (tenant, snapshot_id) DO UPDATE SET {_UPDATED}"""
"""Parameters: ``tenant``, ``snapshot_id``, the content columns (``session``, ``base_id``, ``keep``, ``tail``,
``mrev``, ``base_mrev``), :data:`BOOKKEEPING`'s, then ``session`` and ``snapshot_id`` again: a new row is a leaf
unless a row of its session already names it as parent; a row written over keeps its flag (its children stay)."""
UPDATE_BOOKKEEPING = f"""UPDATE {TABLE} SET base_id = ?, {", ".join(f"{c} = ?" for c in BOOKKEEPING)}
    WHERE tenant = ? AND snapshot_id = ?"""
"""Parameters: ``base_id``, :data:`BOOKKEEPING`'s, ``tenant``, ``snapshot_id``."""
UPDATE_BOOKKEEPING_IN_PLACE = f"""UPDATE {TABLE} SET {", ".join(f"{c} = ?" for c in BOOKKEEPING[1:])}
    WHERE tenant = ? AND snapshot_id = ?"""
""":data:`UPDATE_BOOKKEEPING` for a row whose ``parent_id`` and ``base_id`` stay: SQLite rewrites the index
entries of every indexed column a ``SET`` names, changed or not (a page more in the WAL per index).
Parameters: :data:`BOOKKEEPING`'s but ``parent_id``, ``tenant``, ``snapshot_id``."""
_BASE = "CASE WHEN {0}keep > 0 THEN coalesce({0}base_id, {0}parent_id) END"
SELECT_CHAIN = f"""WITH RECURSIVE chain (depth, snapshot_id, base, keep, tail, mrev, base_mrev) AS (
        SELECT 0, snapshot_id, {_BASE.format("")}, keep, tail, mrev, base_mrev FROM {TABLE}
        WHERE tenant = :tenant AND snapshot_id = :snapshot_id
        UNION ALL
        SELECT chain.depth + 1, s.snapshot_id, {_BASE.format("s.")}, s.keep, s.tail, s.mrev, s.base_mrev
        FROM chain JOIN {TABLE} AS s ON s.tenant = :tenant AND s.snapshot_id = chain.base
        WHERE chain.depth < :max_depth
    )
    SELECT snapshot_id, base, keep, tail, mrev, base_mrev FROM chain ORDER BY depth"""
SELECT_SESSION = f"SELECT id FROM {SESSIONS} WHERE tenant = :tenant AND session_id = :session_id"
INSERT_SESSION = f"INSERT INTO {SESSIONS} (tenant, session_id) VALUES (:tenant, :session_id) ON CONFLICT DO NOTHING"
SELECT_PARENT = f"""SELECT s.mrev, s.tail IS NULL, s.session, n.session_id
    FROM {TABLE} AS s LEFT JOIN {SESSIONS} AS n ON n.id = s.session
    WHERE s.tenant = :tenant AND s.snapshot_id = :snapshot_id"""
DROP_SESSION = (
    f"DELETE FROM {SESSIONS} WHERE id = :session AND NOT EXISTS (SELECT 1 FROM {TABLE} WHERE session = :session)"
)

BATCH = 500
"""Ids per ``IN (?, ...)`` list (well below SQLite's limit on bound parameters)."""


def create_indexes(con: sqlite3.Connection) -> None:
    """Create the snapshot table's indexes if missing (idempotent), inside the caller's write transaction."""
    for statement in (*SCHEMA[2:], TREE):
        con.execute(statement)


def batches(values: Sequence[_T]) -> Iterator[tuple[str, Sequence[_T]]]:
    """``(placeholders, values)`` for ``IN (...)`` lists of at most :data:`BATCH` values."""
    for start in range(0, len(values), BATCH):
        chunk = values[start : start + BATCH]
        yield ", ".join("?" * len(chunk)), chunk


def path_of(url: str | os.PathLike[str]) -> str:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` (SQLAlchemy's convention) or a plain path."""
    text = os.fspath(url)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :].split("?", 1)[0]
    elif text.startswith("sqlite:"):
        raise InvalidArgumentError(f"expected sqlite:///<path> or a plain path, got {text!r}")
    if not text:
        raise InvalidArgumentError("the SQLite store needs a database path")
    return text


# the tables beside the snapshot rows (their DDL lives with their queries: ._index, ._journal, ._outbox)
LEAVES = "interlock_leaves"
OPEN = "interlock_open_interrupts"
JOURNAL = "interlock_journal"
OUTBOX = "interlock_outbox"
