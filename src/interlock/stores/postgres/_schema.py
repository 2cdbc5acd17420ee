"""The PostgreSQL store's tables, their SQL, and their migrations.

The layout mirrors the SQLite store's (see :mod:`interlock.stores.sqlite._schema`: a row
holds ``keep`` messages of its base plus a JSON ``tail``, so storage stays linear in the
conversation) with PostgreSQL's types: ids, statuses and session ids are ``text``, JSON
columns are ``text`` (written and parsed by the shared codec; nothing queries inside
them), timestamps are integer microseconds (``created_us`` since the epoch, the others
after it). Session ids are stored in the row, not interned: interning needs a session
row that a concurrent delete could remove from under a new snapshot.

A row's base is ``base_id``, or, when that is ``NULL`` and ``keep > 0``, its parent (then
in the same session, found through the session index).
"""

from __future__ import annotations

from typing import LiteralString

from .._sql.versions import COMPONENT, SCHEMA_TABLE
from ._index import LEAVES
from ._index import V3 as INDEX_V3
from ._outbox import V2 as OUTBOX_V2

TABLE = "interlock_snapshots"
JOURNAL = "interlock_journal"
CHANNEL = "interlock_snapshots"
"""The LISTEN/NOTIFY channel: a status change notifies ``[tenant, snapshot_id]`` as JSON."""
MAX_CHAIN = 1_000_000
LOCK_SCHEMA = 0x696E_7465_726C_6F63  # the advisory lock key that serialises schema changes ("interloc")

V1 = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        tenant        text    NOT NULL,
        snapshot_id   text    NOT NULL,
        session_id    text    NOT NULL,
        parent_id     text,
        base_id       text,
        keep          integer NOT NULL DEFAULT 0,
        tail          text,
        mrev          bigint  NOT NULL DEFAULT 0,
        base_mrev     bigint,
        state_session text,
        custom        text,
        artifacts     text,
        created_us    bigint  NOT NULL,
        updated_us    bigint,
        heartbeat_us  bigint,
        status        text    NOT NULL,
        finish_reason text,
        error         text,
        version       integer NOT NULL,
        claimed_by    text,
        claimed_us    bigint,
        metadata      text,
        PRIMARY KEY (tenant, snapshot_id)
    )""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_session ON {TABLE} (tenant, session_id)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_base ON {TABLE} (tenant, base_id) WHERE base_id IS NOT NULL",
    f"""CREATE TABLE IF NOT EXISTS {JOURNAL} (
        tenant      text    NOT NULL,
        key         text    NOT NULL,
        session_id  text    NOT NULL,
        snapshot_id text    NOT NULL,
        attempt     integer NOT NULL,
        entry       text    NOT NULL,
        PRIMARY KEY (tenant, key)
    )""",
    f"CREATE INDEX IF NOT EXISTS {JOURNAL}_session ON {JOURNAL} (tenant, session_id)",
    f"CREATE INDEX IF NOT EXISTS {JOURNAL}_snapshot ON {JOURNAL} (tenant, snapshot_id)",
)

V4 = (
    f"""CREATE INDEX IF NOT EXISTS {TABLE}_pending ON {TABLE} ((created_us + heartbeat_us))
        WHERE status = 'pending'""",
)
"""The pending rows by heartbeat: what a worker's sweep reads (``PostgresStore.pending_before``), every few
seconds on every worker, from the few pending rows instead of a scan of every snapshot ever kept."""

V5 = (
    f"DROP INDEX IF EXISTS {TABLE}_children",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_children ON {TABLE} (session_id, tenant, parent_id)",
    f"DROP INDEX IF EXISTS {JOURNAL}_session",
    f"CREATE INDEX IF NOT EXISTS {JOURNAL}_session ON {JOURNAL} (session_id, tenant)",
    f"DROP INDEX IF EXISTS {JOURNAL}_snapshot",
    f"CREATE INDEX IF NOT EXISTS {JOURNAL}_snapshot ON {JOURNAL} (snapshot_id, tenant)",
)
"""The secondary indexes led by the column they find rows by, ``tenant`` second: a lookup by primary key
(``tenant`` and the id or key) can then use no index but the primary key's. Before, the plan PostgreSQL caches
for a prepared lookup, made without statistics while the tables are new, could take a secondary index on its
leading ``tenant`` alone (the same estimate of one row either way) and read every row of the tenant, until the
next ``ANALYZE``: on a new database, ~0.4 ms of server CPU per lookup at ~700 rows, growing with the table."""

MIGRATIONS: dict[int, tuple[LiteralString, ...]] = {1: V1, 2: OUTBOX_V2, 3: INDEX_V3, 4: V4, 5: V5}
"""Version → the statements that bring the previous version to it. Append only.

Version 3 (each session's leaves and the index of open interrupts, :mod:`._index`) also
fills the index from the rows after its statements (:func:`._index.backfill`).
"""
INDEX_VERSION = 3
CURRENT = max(MIGRATIONS)

CREATE_VERSIONS = f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (component text PRIMARY KEY, version integer NOT NULL)"
SELECT_VERSION = f"SELECT version FROM {SCHEMA_TABLE} WHERE component = '{COMPONENT}'"
STAMP = f"""INSERT INTO {SCHEMA_TABLE} (component, version) VALUES ('{COMPONENT}', %s)
    ON CONFLICT (component) DO UPDATE SET version = excluded.version"""

COLUMNS = (
    "snapshot_id, session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, custom, artifacts, "
    "created_us, updated_us, heartbeat_us, status, finish_reason, error, version, claimed_by, claimed_us, metadata"
)
SELECT_ROW = f"SELECT {COLUMNS}, xmin::text FROM {TABLE} WHERE tenant = %s AND snapshot_id = %s"
"""A row's :data:`COLUMNS`, then its version's ``xmin`` (see :mod:`._known`)."""
SELECT_LEAF_ROWS = f"""SELECT {", ".join("s." + c for c in COLUMNS.split(", "))}, s.xmin::text FROM {LEAVES} AS l
    JOIN {TABLE} AS s ON s.tenant = l.tenant AND s.snapshot_id = l.snapshot_id AND s.session_id = l.session_id
    WHERE l.tenant = %(tenant)s AND l.session_id = %(session_id)s"""
"""The rows (:data:`SELECT_ROW`'s columns and ``xmin``) of a session's leaves."""
LOCK_ROW = SELECT_ROW + " FOR UPDATE"
_VALUES = "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
INSERT = f"INSERT INTO {TABLE} (tenant, {COLUMNS}) {_VALUES}"
_NAMED: list[LiteralString] = [f"%(row_{c})s" for c in ("tenant", *COLUMNS.split(", "))]
INSERT_NAMED = f"INSERT INTO {TABLE} (tenant, {COLUMNS}) VALUES ({', '.join(_NAMED)})"
""":data:`INSERT` with named parameters (``row_`` and the column), to be folded into another statement."""
PRIMARY_KEY = f"{TABLE}_pkey"
"""The constraint an insert violates when another transaction created the row first (the save then runs again)."""
UPSERT = f"""INSERT INTO {TABLE} (tenant, {COLUMNS}) {_VALUES}
    ON CONFLICT (tenant, snapshot_id) DO UPDATE SET
        parent_id = excluded.parent_id, base_id = excluded.base_id, keep = excluded.keep, tail = excluded.tail,
        mrev = excluded.mrev, base_mrev = excluded.base_mrev, state_session = excluded.state_session,
        custom = excluded.custom, artifacts = excluded.artifacts, created_us = excluded.created_us,
        updated_us = excluded.updated_us, heartbeat_us = excluded.heartbeat_us, status = excluded.status,
        finish_reason = excluded.finish_reason, error = excluded.error, version = excluded.version,
        claimed_by = excluded.claimed_by, claimed_us = excluded.claimed_us, metadata = excluded.metadata"""
UPDATE_BOOKKEEPING = f"""UPDATE {TABLE} SET
        base_id = %s, parent_id = %s, state_session = %s, custom = %s, artifacts = %s, created_us = %s,
        updated_us = %s, heartbeat_us = %s, status = %s, finish_reason = %s, error = %s, version = %s,
        claimed_by = %s, claimed_us = %s, metadata = %s
    WHERE tenant = %s AND snapshot_id = %s"""
SELECT_PARENT = f"""SELECT mrev, tail IS NULL, session_id FROM {TABLE}
    WHERE tenant = %s AND snapshot_id = %s FOR SHARE"""
"""A new row's parent, locked so that its messages cannot change (or the row go) before the new row commits."""
_BASE = "CASE WHEN {0}keep > 0 THEN coalesce({0}base_id, {0}parent_id) END"
SELECT_CHAIN = f"""WITH RECURSIVE chain (depth, snapshot_id, base, keep, tail, mrev, base_mrev) AS (
        SELECT 0, snapshot_id, {_BASE.format("")}, keep, tail, mrev, base_mrev FROM {TABLE}
        WHERE tenant = %(tenant)s AND snapshot_id = %(id)s
        UNION ALL
        SELECT chain.depth + 1, s.snapshot_id, {_BASE.format("s.")}, s.keep, s.tail, s.mrev, s.base_mrev
        FROM chain CROSS JOIN LATERAL (
            SELECT snapshot_id, parent_id, base_id, keep, tail, mrev, base_mrev FROM {TABLE}
            WHERE tenant = %(tenant)s AND snapshot_id = chain.base LIMIT 1
        ) AS s
        WHERE chain.depth < %(max)s
    )
    SELECT snapshot_id, base, keep, tail, mrev, base_mrev FROM chain ORDER BY depth"""
"""A row's base chain, the row first. Each step looks its base up by primary key: the ``LIMIT 1`` (a no-op on
the key) keeps the planner from joining the chain to the whole table at each step (a hash join over a seq
scan, or a scan of the tenant's rows), its choice for small tables, which made a 240-row chain 8x slower."""
SELECT_DEPENDENTS = f"""SELECT snapshot_id, coalesce(base_id, parent_id), keep, tail FROM {TABLE}
    WHERE tenant = %(tenant)s AND NOT (snapshot_id = ANY(%(exclude)s)) AND (
        base_id = ANY(%(ids)s)
        OR (session_id = ANY(%(sessions)s) AND base_id IS NULL AND keep > 0 AND parent_id = ANY(%(ids)s)))
    FOR UPDATE"""
"""The rows based on some of ``ids``: named bases, and implicit ones (children in the base's session)."""
CHECKPOINT = f"""UPDATE {TABLE} SET base_id = NULL, keep = 0, base_mrev = NULL, tail = %s
    WHERE tenant = %s AND snapshot_id = %s"""
