"""The embedded default store: one SQLite file, shared safely by threads and processes.

Layout
------
One table, ``interlock_snapshots``, one row per ``(tenant, snapshot_id)`` (``''`` stands
for the ``None`` tenant). Storage is linear in conversation length: a row does not hold
the whole history, only what it adds to another row's:

* ``keep``: how many of the base's messages are kept as this row's prefix; ``0`` means a
  full checkpoint (no base);
* the base: the row named by ``base_id``, or, when ``base_id`` is ``NULL`` (the usual
  case, which saves an id and an index entry per row), the parent ``parent_id``, which
  is then in the same session;
* ``tail``: JSON (Genkit camelCase, via :mod:`interlock.wire`) of the messages after the
  prefix; ``NULL`` when the snapshot has no state at all;
* ``mrev``: a random id of this row's message content, changed whenever its messages
  change; ``base_mrev`` is the base's ``mrev`` when this row was written.

So a row's messages are ``messages(base)[:keep] + tail``. A row's messages only change
after every row based on it has been rewritten as a full checkpoint (the same happens
before a delete), so a row's prefix never changes under it. Custom state, artifacts,
error and metadata are JSON columns (``state_session`` is ``NULL`` when the state's
session id is the row's, else JSON); timestamps are integer microseconds since the
Unix epoch (exact, and read back as timezone-aware UTC datetimes).

Caching and threads
-------------------
Each store owns one connection, used only by one dedicated worker thread; the async
methods hand work to it with :meth:`asyncio.loop.run_in_executor`, so no blocking call
runs on the event loop. The worker keeps an LRU cache ``(tenant, snapshot_id) → (mrev,
messages)``; because ``mrev`` names the content, a cached entry is never stale, even
when another process writes the file: saving or loading a child of a recently seen
snapshot neither re-reads nor re-parses the chain. A miss loads the whole base chain in
one recursive query.

Concurrency
-----------
WAL journal, ``synchronous=FULL`` and a 30 s busy timeout; every write transaction starts
with ``BEGIN IMMEDIATE``, and :meth:`SQLiteStore.save` runs read → updater → write inside
that one transaction, so it is atomic across processes. The updater therefore runs on
the worker thread: like every updater, it must be a pure function.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sqlite3
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, NamedTuple, TypeVar, cast

from ..errors import DataLossError, InvalidArgumentError, UnavailableError, UsageError
from ..messages import Message
from ..sessions import TERMINAL, Artifact, SessionState, Snapshot
from ..wire import (
    artifact_from_json,
    artifact_to_json,
    error_from_json,
    error_to_json,
    messages_from_json,
    messages_to_json,
)
from . import SnapshotInfo, Updater, apply_update, pick_leaf
from ._prune import prunable

__all__ = ["SQLiteStore"]

_R = TypeVar("_R")

_TABLE = "interlock_snapshots"
_MAX_CHAIN = 1_000_000
"""A base chain longer than this is taken as corrupt (a cycle)."""

_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {_TABLE} (
        tenant        TEXT    NOT NULL,
        snapshot_id   TEXT    NOT NULL,
        session_id    TEXT    NOT NULL,
        parent_id     TEXT,
        base_id       TEXT,
        keep          INTEGER NOT NULL DEFAULT 0,
        tail          TEXT,
        mrev          INTEGER NOT NULL DEFAULT 0,
        base_mrev     INTEGER,
        state_session TEXT,
        custom        TEXT,
        artifacts     TEXT,
        created_us    INTEGER NOT NULL,
        updated_us    INTEGER,
        heartbeat_us  INTEGER,
        status        TEXT    NOT NULL,
        finish_reason TEXT,
        error         TEXT,
        version       INTEGER NOT NULL,
        claimed_by    TEXT,
        claimed_us    INTEGER,
        metadata      TEXT,
        PRIMARY KEY (tenant, snapshot_id)
    )""",
    f"CREATE INDEX IF NOT EXISTS {_TABLE}_session ON {_TABLE} (tenant, session_id)",
    f"CREATE INDEX IF NOT EXISTS {_TABLE}_base ON {_TABLE} (tenant, base_id) WHERE base_id IS NOT NULL",
)

_COLUMNS = (
    "snapshot_id, session_id, parent_id, base_id, keep, tail, mrev, base_mrev, state_session, custom, artifacts, "
    "created_us, updated_us, heartbeat_us, status, finish_reason, error, version, claimed_by, claimed_us, metadata"
)
_SELECT_ROW = f"SELECT {_COLUMNS} FROM {_TABLE} WHERE tenant = ? AND snapshot_id = ?"
_UPSERT = f"""INSERT INTO {_TABLE} (tenant, {_COLUMNS})
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (tenant, snapshot_id) DO UPDATE SET
        parent_id = excluded.parent_id, base_id = excluded.base_id, keep = excluded.keep, tail = excluded.tail,
        mrev = excluded.mrev, base_mrev = excluded.base_mrev, state_session = excluded.state_session,
        custom = excluded.custom, artifacts = excluded.artifacts, created_us = excluded.created_us,
        updated_us = excluded.updated_us, heartbeat_us = excluded.heartbeat_us, status = excluded.status,
        finish_reason = excluded.finish_reason, error = excluded.error, version = excluded.version,
        claimed_by = excluded.claimed_by, claimed_us = excluded.claimed_us, metadata = excluded.metadata"""
_UPDATE_BOOKKEEPING = f"""UPDATE {_TABLE} SET
        base_id = ?, parent_id = ?, state_session = ?, custom = ?, artifacts = ?, created_us = ?, updated_us = ?,
        heartbeat_us = ?, status = ?, finish_reason = ?, error = ?, version = ?, claimed_by = ?, claimed_us = ?,
        metadata = ?
    WHERE tenant = ? AND snapshot_id = ?"""
_BASE = "CASE WHEN {0}keep > 0 THEN coalesce({0}base_id, {0}parent_id) END"
_SELECT_CHAIN = f"""WITH RECURSIVE chain (depth, snapshot_id, base, keep, tail, mrev, base_mrev) AS (
        SELECT 0, snapshot_id, {_BASE.format("")}, keep, tail, mrev, base_mrev FROM {_TABLE}
        WHERE tenant = ?1 AND snapshot_id = ?2
        UNION ALL
        SELECT chain.depth + 1, s.snapshot_id, {_BASE.format("s.")}, s.keep, s.tail, s.mrev, s.base_mrev
        FROM chain JOIN {_TABLE} AS s ON s.tenant = ?1 AND s.snapshot_id = chain.base
        WHERE chain.depth < ?3
    )
    SELECT snapshot_id, base, keep, tail, mrev, base_mrev FROM chain ORDER BY depth"""


class _Row(NamedTuple):
    snapshot_id: str
    session_id: str
    parent_id: str | None
    base_id: str | None
    keep: int
    tail: str | None
    mrev: int
    base_mrev: int | None
    state_session: str | None
    custom: str | None
    artifacts: str | None
    created_us: int
    updated_us: int | None
    heartbeat_us: int | None
    status: str
    finish_reason: str | None
    error: str | None
    version: int
    claimed_by: str | None
    claimed_us: int | None
    metadata: str | None

    @property
    def base(self) -> str | None:
        """The row whose messages form this row's prefix, or ``None`` for a full checkpoint."""
        return None if self.keep == 0 else (self.base_id or self.parent_id)


class _Link(NamedTuple):
    """One row of a base chain."""

    snapshot_id: str
    base: str | None
    keep: int
    tail: str | None
    mrev: int
    base_mrev: int | None


Messages = tuple[Message, ...]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _to_us(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICROSECOND


def _from_us(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=value)


def _time(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Element-wise equal, cheaply.

    Tuple comparison (in C) checks identity before ``==``, and the runtime shares
    (immutable) messages between snapshots, so this is mostly a pointer scan.
    """
    return len(a) == len(b) and tuple(a) == tuple(b)


def _common_prefix(new: Sequence[Message], base: Messages) -> int:
    """How many leading messages ``new`` shares with ``base`` (usually all of ``base``)."""
    n = len(base)
    if len(new) >= n and tuple(new[:n]) == base:
        return n
    n = min(n, len(new))
    k = 0
    while k < n and (new[k] is base[k] or new[k] == base[k]):
        k += 1
    return k


def _corrupt(snapshot_id: str, what: str, exc: BaseException | None = None) -> DataLossError:
    detail = f": {exc}" if exc is not None else ""
    return DataLossError(f"snapshot {snapshot_id!r} is corrupt in the SQLite store ({what}{detail})")


def _json(snapshot_id: str, column: str, text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError) as exc:
        raise _corrupt(snapshot_id, f"column {column!r} is not valid JSON", exc) from exc


def _parse_tail(snapshot_id: str, text: str) -> list[Message]:
    data = _json(snapshot_id, "tail", text)
    try:
        return messages_from_json(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _corrupt(snapshot_id, "column 'tail' does not hold messages", exc) from exc


def _path_of(url: str | os.PathLike[str]) -> str:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` (SQLAlchemy's convention) or a plain path."""
    text = os.fspath(url)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :].split("?", 1)[0]
    elif text.startswith("sqlite:"):
        raise InvalidArgumentError(f"expected sqlite:///<path> or a plain path, got {text!r}")
    if not text:
        raise InvalidArgumentError("the SQLite store needs a database path")
    return text


class SQLiteStore:
    """The embedded default :class:`~interlock.stores.SessionStore`: one SQLite file.

    Several stores, in several threads or processes, may share one file. Use it as an
    async context manager (or call :meth:`close`) so its worker thread and connection
    are released::

        async with SQLiteStore("sessions.db") as store:
            ...

    Args:
        path: the database file (created if missing), or ``":memory:"`` for a private
            in-memory database.
        reject_branching: make :meth:`latest` raise ``FailedPreconditionError`` for a
            session with several leaves instead of returning the newest.
        poll_interval: how often :meth:`watch` polls for changes made by other store
            objects or processes (changes through this object wake it at once).
        cache_size: how many snapshots' message lists the LRU cache keeps.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        reject_branching: bool = False,
        poll_interval: float = 0.05,
        cache_size: int = 256,
    ) -> None:
        self.path = os.fspath(path)
        self.reject_branching = reject_branching
        self.poll_interval = poll_interval
        self._cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], tuple[int, Messages]] = OrderedDict()
        self._con: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="interlock-sqlite")
        self._closed = False
        self._watchers: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls, url: str | os.PathLike[str], *, reject_branching: bool = False
    ) -> AsyncGenerator[SQLiteStore, None]:
        """Open a store from ``sqlite:///<path>`` (``sqlite:////abs/path`` for an absolute one) or a path."""
        store = cls(_path_of(url), reject_branching=reject_branching)
        try:
            await store.setup()
            yield store
        finally:
            await store.close()

    async def __aenter__(self) -> SQLiteStore:
        await self.setup()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def setup(self) -> None:
        """Open the file and create the table and indexes (idempotent; first use does it too)."""
        await self._call(self._db)

    async def close(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close_db)
        finally:
            self._executor.shutdown(wait=True)

    # SessionStore ---------------------------------------------------------------------------

    async def load(self, snapshot_id: str, *, tenant: str | None = None) -> Snapshot | None:
        return await self._call(self._load, tenant or "", snapshot_id)

    async def latest(self, session_id: str, *, tenant: str | None = None) -> Snapshot | None:
        return await self._call(self._latest, tenant or "", session_id)

    async def save(self, snapshot_id: str, update: Updater, *, tenant: str | None = None) -> Snapshot | None:
        written, status_changed = await self._call(self._save, tenant or "", snapshot_id, update)
        if status_changed:
            self._wake()
        return written

    async def watch(self, snapshot_id: str, *, tenant: str | None = None) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        entry = (loop, wake)
        self._watchers.add(entry)
        try:
            last: str | None = None
            while True:
                wake.clear()
                status = await self._call(self._status, tenant or "", snapshot_id)
                if status is None:
                    return
                if status != last:
                    last = status
                    yield status
                if status in TERMINAL:
                    return
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        await wake.wait()
        finally:
            self._watchers.discard(entry)

    async def list(
        self, *, tenant: str | None = None, session_id: str | None = None, finish_reason: str | None = None
    ) -> list[SnapshotInfo]:
        return await self._call(self._list, tenant or "", session_id, finish_reason)

    async def delete(self, snapshot_ids: Iterable[str], *, tenant: str | None = None) -> int:
        ids = list(dict.fromkeys(snapshot_ids))
        return await self._call(self._delete, tenant or "", ids)

    async def prune(
        self,
        *,
        session_id: str | None = None,
        keep_last: int | None = None,
        older_than: datetime | None = None,
        tenant: str | None = None,
    ) -> int:
        """Delete old snapshots of a tenant (one session, or all); returns how many were deleted.

        Deleted are the snapshots that are not ``pending``, not among the last
        ``keep_last`` snapshots of any leaf's parent chain (so the latest snapshot of every
        session stays), and, with ``older_than``, created before it. At least one of
        ``keep_last`` (≥ 1) and ``older_than`` is required. Every remaining snapshot stays
        loadable with its full history (see :meth:`delete`).
        """
        return await self._call(self._prune, tenant or "", session_id, keep_last, older_than)

    # plumbing -------------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., _R], *args: Any) -> _R:
        """Run ``fn(*args)`` on the worker thread."""
        if self._closed:
            raise UsageError(f"the SQLite store at {self.path!r} is closed")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        except sqlite3.OperationalError as exc:  # locked past the busy timeout, disk full, I/O error, ...
            raise UnavailableError(f"the SQLite store at {self.path!r} failed: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # a damaged file
            raise DataLossError(f"the SQLite store at {self.path!r} is not a usable database: {exc}") from exc

    def _wake(self) -> None:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, event in list(self._watchers):
            if loop is running:
                event.set()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    def _db(self) -> sqlite3.Connection:
        """The connection (worker thread only), opened and set up on first use."""
        if self._con is not None:
            return self._con
        con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            con.execute("PRAGMA busy_timeout = 30000")
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = FULL")
            con.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA:
                    con.execute(statement)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except BaseException:
            con.close()
            raise
        self._con = con
        return con

    def _close_db(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        self._cache.clear()

    @contextlib.contextmanager
    def _read_txn(self) -> Generator[sqlite3.Connection, None, None]:
        """A read transaction: every query inside sees one consistent version of the file."""
        con = self._db()
        con.execute("BEGIN")
        try:
            yield con
        finally:
            if con.in_transaction:
                con.execute("COMMIT")

    def _write_txn(self, fn: Callable[..., _R], *args: Any) -> _R:
        con = self._db()
        con.execute("BEGIN IMMEDIATE")
        try:
            result = fn(con, *args)
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        return result

    # cache ------------------------------------------------------------------------------------

    def _cached(self, tenant: str, snapshot_id: str, mrev: int | None) -> Messages | None:
        key = (tenant, snapshot_id)
        hit = self._cache.get(key)
        if hit is None or hit[0] != mrev:
            return None
        self._cache.move_to_end(key)
        return hit[1]

    def _remember(self, tenant: str, snapshot_id: str, mrev: int, messages: Messages) -> None:
        key = (tenant, snapshot_id)
        self._cache[key] = (mrev, messages)
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # reading ----------------------------------------------------------------------------------

    @staticmethod
    def _fetch(con: sqlite3.Connection, tenant: str, snapshot_id: str) -> _Row | None:
        found = con.execute(_SELECT_ROW, (tenant, snapshot_id)).fetchone()
        return None if found is None else _Row._make(found)

    def _messages_of(self, con: sqlite3.Connection, tenant: str, row: _Row) -> Messages | None:
        """A row's full message history (``None``: the row has no state)."""
        if row.tail is None:
            return None
        hit = self._cached(tenant, row.snapshot_id, row.mrev)
        if hit is not None:
            return hit
        if row.base is None:
            if row.keep:
                raise _corrupt(row.snapshot_id, f"keeps {row.keep} messages but has no parent to keep them from")
            messages = tuple(_parse_tail(row.snapshot_id, row.tail))
        else:
            base = self._cached(tenant, row.base, row.base_mrev)
            if base is None:
                return self._chain(con, tenant, row.snapshot_id, row.mrev)
            if row.keep > len(base):
                raise _corrupt(row.snapshot_id, f"keeps {row.keep} messages of a base that has {len(base)}")
            messages = base[: row.keep] + tuple(_parse_tail(row.snapshot_id, row.tail))
        self._remember(tenant, row.snapshot_id, row.mrev, messages)
        return messages

    def _chain(self, con: sqlite3.Connection, tenant: str, snapshot_id: str, mrev: int | None) -> Messages:
        """Assemble a row's messages from its base chain, read in one query (``mrev``: expected, if known)."""
        links = [_Link._make(r) for r in con.execute(_SELECT_CHAIN, (tenant, snapshot_id, _MAX_CHAIN))]
        if not links:
            raise _corrupt(snapshot_id, "its row vanished while its history was read")
        if mrev is not None and links[0].mrev != mrev:
            raise _corrupt(snapshot_id, "its message revision changed while its history was read")
        pending: list[_Link] = []
        start: Messages = ()
        for i, link in enumerate(links):
            if link.tail is None:
                raise _corrupt(snapshot_id, f"its history passes through {link.snapshot_id!r}, which has no state")
            if i > 0 and links[i - 1].base_mrev != link.mrev:
                raise _corrupt(links[i - 1].snapshot_id, f"its base {link.snapshot_id!r} changed under it")
            hit = self._cached(tenant, link.snapshot_id, link.mrev)
            if hit is not None:
                start = hit
                break
            pending.append(link)
            if link.base is None:
                break
        else:
            last = links[-1]
            raise _corrupt(last.snapshot_id, f"its base snapshot {last.base!r} is missing (or the chain is cyclic)")
        messages = list(start)
        for link in reversed(pending):
            if link.keep > len(messages):
                raise _corrupt(link.snapshot_id, f"keeps {link.keep} messages of a base that has {len(messages)}")
            del messages[link.keep :]
            messages.extend(_parse_tail(link.snapshot_id, cast(str, link.tail)))
        result = tuple(messages)
        self._remember(tenant, links[0].snapshot_id, links[0].mrev, result)
        return result

    def _decode(self, row: _Row, messages: Messages | None) -> tuple[Snapshot, list[Artifact]]:
        """The snapshot a row holds, and its artifacts as parsed (to notice unchanged artifacts on save)."""
        sid = row.snapshot_id
        artifacts: list[Artifact] = []
        state: SessionState | None = None
        try:
            if messages is not None:
                if row.artifacts is not None:
                    data = _json(sid, "artifacts", row.artifacts)
                    if not isinstance(data, list):
                        raise _corrupt(sid, "column 'artifacts' is not a JSON list")
                    artifacts = [artifact_from_json(a) for a in cast(list[Any], data)]
                state_session: Any = row.session_id
                if row.state_session is not None:
                    state_session = _json(sid, "state_session", row.state_session)
                    if state_session is not None and not isinstance(state_session, str):
                        raise _corrupt(sid, "column 'state_session' is not a JSON string or null")
                state = SessionState(
                    session_id=state_session,
                    messages=list(messages),
                    custom=None if row.custom is None else _json(sid, "custom", row.custom),
                    artifacts=list(artifacts),
                )
            error = None if row.error is None else error_from_json(_json(sid, "error", row.error))
            metadata: Any = None if row.metadata is None else _json(sid, "metadata", row.metadata)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise _corrupt(sid, "a JSON column has the wrong shape", exc) from exc
        if metadata is not None and not isinstance(metadata, dict):
            raise _corrupt(sid, "column 'metadata' is not a JSON object")
        snapshot = Snapshot(
            snapshot_id=sid,
            session_id=row.session_id,
            parent_id=row.parent_id,
            created_at=_time(row.created_us),
            updated_at=_from_us(row.updated_us),
            heartbeat_at=_from_us(row.heartbeat_us),
            status=row.status,
            finish_reason=row.finish_reason,
            error=error,
            state=state,
            version=row.version,
            claimed_by=row.claimed_by,
            claimed_at=_from_us(row.claimed_us),
            metadata=cast(dict[str, Any] | None, metadata),
        )
        return snapshot, artifacts

    def _read(self, con: sqlite3.Connection, tenant: str, snapshot_id: str) -> Snapshot | None:
        row = self._fetch(con, tenant, snapshot_id)
        if row is None:
            return None
        return self._decode(row, self._messages_of(con, tenant, row))[0]

    def _load(self, tenant: str, snapshot_id: str) -> Snapshot | None:
        with self._read_txn() as con:
            return self._read(con, tenant, snapshot_id)

    def _latest(self, tenant: str, session_id: str) -> Snapshot | None:
        with self._read_txn() as con:
            found = cast(
                list[tuple[str, str | None, int]],
                con.execute(
                    f"SELECT snapshot_id, parent_id, created_us FROM {_TABLE} WHERE tenant = ? AND session_id = ?",
                    (tenant, session_id),
                ).fetchall(),
            )
            parents = {parent for _, parent, _ in found if parent}
            # pick_leaf only looks at the leaves' created_at: convert just those.
            rows = [(sid, parent, _time(us) if sid not in parents else _EPOCH) for sid, parent, us in found]
            leaf = pick_leaf(session_id, rows, reject_branching=self.reject_branching)
            return None if leaf is None else self._read(con, tenant, leaf)

    def _status(self, tenant: str, snapshot_id: str) -> str | None:
        found = (
            self._db()
            .execute(f"SELECT status FROM {_TABLE} WHERE tenant = ? AND snapshot_id = ?", (tenant, snapshot_id))
            .fetchone()
        )
        return None if found is None else cast(str, found[0])

    def _list(self, tenant: str, session_id: str | None, finish_reason: str | None) -> list[SnapshotInfo]:
        sql = (
            "SELECT snapshot_id, session_id, parent_id, created_us, updated_us, status, finish_reason, metadata "
            f"FROM {_TABLE} WHERE tenant = ?"
        )
        args: list[Any] = [tenant]
        if session_id is not None:
            sql += " AND session_id = ?"
            args.append(session_id)
        if finish_reason is not None:
            sql += " AND finish_reason = ?"
            args.append(finish_reason)
        sql += " ORDER BY created_us DESC, snapshot_id DESC"
        out: list[SnapshotInfo] = []
        for sid, session, parent, created, updated, status, finish, meta in self._db().execute(sql, args):
            metadata: Any = None if meta is None else _json(sid, "metadata", meta)
            agent = cast(dict[str, Any], metadata).get("agent") if isinstance(metadata, dict) else None
            out.append(
                SnapshotInfo(
                    snapshot_id=sid,
                    session_id=session,
                    parent_id=parent,
                    created_at=_time(created),
                    updated_at=_from_us(updated),
                    status=status,
                    finish_reason=finish,
                    agent=agent if isinstance(agent, str) else None,
                )
            )
        return out

    # writing ----------------------------------------------------------------------------------

    def _save(self, tenant: str, snapshot_id: str, update: Updater) -> tuple[Snapshot | None, bool]:
        return self._write_txn(self._save_rows, tenant, snapshot_id, update)

    def _save_rows(
        self, con: sqlite3.Connection, tenant: str, snapshot_id: str, update: Updater
    ) -> tuple[Snapshot | None, bool]:
        row = self._fetch(con, tenant, snapshot_id)
        old: Messages | None = None
        current: Snapshot | None = None
        old_artifacts: list[Artifact] = []
        if row is not None:
            old = self._messages_of(con, tenant, row)
            current, old_artifacts = self._decode(row, old)
        new = apply_update(current, update, snapshot_id)
        if new is None:
            return None, False
        self._write(con, tenant, row, old, old_artifacts, new)
        return new, row is None or row.status != new.status

    def _write(
        self,
        con: sqlite3.Connection,
        tenant: str,
        row: _Row | None,
        old: Messages | None,
        old_artifacts: list[Artifact],
        new: Snapshot,
    ) -> None:
        sid = new.snapshot_id
        state = new.state
        custom: str | None = None
        artifacts: str | None = None
        if state is not None:
            if state.custom is not None:
                try:
                    custom = _dumps(state.custom)
                except (TypeError, ValueError) as exc:
                    what = f"snapshot {sid!r}: custom state is not JSON-serialisable"
                    raise InvalidArgumentError(f"{what}: {exc}") from exc
            if state.artifacts:
                if row is not None and row.artifacts is not None and _same(state.artifacts, old_artifacts):
                    artifacts = row.artifacts
                else:
                    artifacts = _dumps([artifact_to_json(a) for a in state.artifacts])
        bookkeeping = (
            new.parent_id,
            None if state is None or state.session_id == new.session_id else _dumps(state.session_id),
            custom,
            artifacts,
            _to_us(new.created_at),
            _to_us(new.updated_at),
            _to_us(new.heartbeat_at),
            new.status,
            new.finish_reason,
            None if new.error is None else _dumps(error_to_json(new.error)),
            new.version,
            new.claimed_by,
            _to_us(new.claimed_at),
            None if new.metadata is None else _dumps(new.metadata),
        )
        if old is None or state is None:
            unchanged = old is None and state is None
        else:
            unchanged = _same(state.messages, old)
        if row is not None and unchanged:
            # Heartbeats, aborts, claims: the messages stay as stored, not re-encoded.
            kept_base = row.base_id
            if kept_base is None and row.keep > 0 and new.parent_id != row.parent_id:
                kept_base = row.parent_id  # the implicit base (the old parent) must be named now
            con.execute(_UPDATE_BOOKKEEPING, (kept_base, *bookkeeping, tenant, sid))
            return
        if row is not None and old is not None:
            self._checkpoint_dependents(con, tenant, {sid: old}, exclude=())
        base_id: str | None = None
        keep = 0
        base_mrev: int | None = None
        tail: str | None = None
        mrev = 0
        if state is not None:
            messages = tuple(state.messages)
            base = self._base_for(con, tenant, new, messages)
            if base is not None:
                base_id, keep, base_mrev = base
            tail = _dumps(messages_to_json(list(messages[keep:])))
            mrev = secrets.randbits(47)  # 6 bytes on disk; a collision would also need the same row
            self._remember(tenant, sid, mrev, messages)
        (parent_id, state_session, *rest) = bookkeeping
        con.execute(
            _UPSERT,
            (
                tenant,
                sid,
                new.session_id,
                parent_id,
                base_id,
                keep,
                tail,
                mrev,
                base_mrev,
                state_session,
                *rest,
            ),
        )

    def _base_for(
        self, con: sqlite3.Connection, tenant: str, new: Snapshot, messages: Messages
    ) -> tuple[str | None, int, int] | None:
        """``(base_id, keep, base_mrev)`` for new messages: the parent, when it shares a prefix.

        ``base_id`` is ``None`` (the base is implicitly the parent) when the parent is in
        the same session, so that rows based on a row are found through the session index.
        """
        parent_id = new.parent_id
        if parent_id is None or parent_id == new.snapshot_id or not messages:
            return None
        found = con.execute(
            f"SELECT mrev, tail IS NULL, session_id FROM {_TABLE} WHERE tenant = ? AND snapshot_id = ?",
            (tenant, parent_id),
        ).fetchone()
        if found is None or found[1]:
            return None
        mrev = cast(int, found[0])
        parent = self._cached(tenant, parent_id, mrev)
        if parent is None:
            try:
                parent = self._chain(con, tenant, parent_id, mrev)
            except DataLossError:
                return None  # a corrupt parent: this row becomes a full checkpoint instead
        keep = _common_prefix(messages, parent)
        if keep == 0:
            return None
        return (None if found[2] == new.session_id else parent_id), keep, mrev

    def _checkpoint_dependents(
        self, con: sqlite3.Connection, tenant: str, bases: dict[str, Messages | None], *, exclude: Sequence[str]
    ) -> None:
        """Rewrite every row based on one of ``bases`` (id → its messages, loaded if ``None``) as a full checkpoint.

        Their message content (and so their ``mrev``) does not change, only how it is stored.
        """
        ids, skip = _dumps(list(bases)), _dumps(list(exclude))
        # named bases (the partial index on base_id) ...
        found = con.execute(
            f"SELECT snapshot_id, base_id, keep, tail FROM {_TABLE} "
            "WHERE tenant = ? AND base_id IN (SELECT value FROM json_each(?)) "
            "AND snapshot_id NOT IN (SELECT value FROM json_each(?))",
            (tenant, ids, skip),
        ).fetchall()
        # ... and implicit ones: children in the base's own session (the session index)
        sessions: dict[str, list[str]] = {}
        for sid, session in con.execute(
            f"SELECT snapshot_id, session_id FROM {_TABLE} "
            "WHERE tenant = ? AND snapshot_id IN (SELECT value FROM json_each(?))",
            (tenant, ids),
        ):
            sessions.setdefault(session, []).append(sid)
        for session, parents in sessions.items():
            found += con.execute(
                f"SELECT snapshot_id, parent_id, keep, tail FROM {_TABLE} "
                "WHERE tenant = ? AND session_id = ? AND base_id IS NULL AND keep > 0 "
                "AND parent_id IN (SELECT value FROM json_each(?)) "
                "AND snapshot_id NOT IN (SELECT value FROM json_each(?))",
                (tenant, session, _dumps(parents), skip),
            ).fetchall()
        encoded: dict[str, list[dict[str, Any]]] = {}
        for sid, base_id, keep, tail in cast(list[tuple[str, str, int, str | None]], found):
            if base_id not in encoded:
                messages = bases[base_id]
                if messages is None:
                    messages = self._chain(con, tenant, base_id, None)
                encoded[base_id] = messages_to_json(list(messages))
            prefix = encoded[base_id]
            if tail is None or keep > len(prefix):
                raise _corrupt(sid, f"it keeps {keep} messages of base {base_id!r}, which has {len(prefix)}")
            rest = _json(sid, "tail", tail)
            if not isinstance(rest, list):
                raise _corrupt(sid, "column 'tail' is not a JSON list")
            full = prefix[:keep] + cast(list[Any], rest)
            con.execute(
                f"UPDATE {_TABLE} SET base_id = NULL, keep = 0, base_mrev = NULL, tail = ? "
                "WHERE tenant = ? AND snapshot_id = ?",
                (_dumps(full), tenant, sid),
            )

    def _delete(self, tenant: str, ids: list[str]) -> int:
        return self._write_txn(self._delete_rows, tenant, ids)

    def _delete_rows(self, con: sqlite3.Connection, tenant: str, ids: list[str]) -> int:
        if not ids:
            return 0
        bases: dict[str, Messages | None] = {sid: None for sid in ids}
        self._checkpoint_dependents(con, tenant, bases, exclude=ids)
        deleted = con.execute(
            f"DELETE FROM {_TABLE} WHERE tenant = ? AND snapshot_id IN (SELECT value FROM json_each(?))",
            (tenant, _dumps(ids)),
        ).rowcount
        for sid in ids:
            self._cache.pop((tenant, sid), None)
        return deleted

    def _prune(self, tenant: str, session_id: str | None, keep_last: int | None, older_than: datetime | None) -> int:
        return self._write_txn(self._prune_rows, tenant, session_id, keep_last, older_than)

    def _prune_rows(
        self,
        con: sqlite3.Connection,
        tenant: str,
        session_id: str | None,
        keep_last: int | None,
        older_than: datetime | None,
    ) -> int:
        sql = f"SELECT snapshot_id, parent_id, created_us, status FROM {_TABLE} WHERE tenant = ?"
        args: list[Any] = [tenant]
        if session_id is not None:
            sql += " AND session_id = ?"
            args.append(session_id)
        found = cast(list[tuple[str, str | None, int, str]], con.execute(sql, args).fetchall())
        rows = [(sid, parent, _time(us), status) for sid, parent, us, status in found]
        return self._delete_rows(con, tenant, prunable(rows, keep_last=keep_last, older_than=older_than))
