"""How the store's statements reach PostgreSQL: prepared, batched, one wait per round trip (psycopg's libpq layer).

:class:`Wire` wraps one pooled psycopg connection. :meth:`Wire.execute` takes the store's
SQL (``%s`` or ``%(name)s`` placeholders) and arguments, and answers an :class:`Answer`
whose rows are read with ``await answer.fetchone()`` / ``fetchall()``. Outside
:meth:`Wire.batch` a statement goes out at once; inside, statements queue and go out
together, in libpq's pipeline mode, when an answer is read or the batch ends: one round
trip for all of them (``BEGIN``, a guard, the writes, ``COMMIT``). Each distinct statement
is prepared on a connection the first time it runs there (the ``Parse`` rides in the same
round trip), so PostgreSQL plans it once; later runs send only its name and arguments.

Why not psycopg's cursors: measured here (one task on uvloop), a pipeline of ``BEGIN``,
8 statements and ``COMMIT`` through them costs 212 µs of client CPU, and through this module
40 µs; one autocommitted statement 31 µs against 19 µs (asyncpg: 14 µs, but it cannot pipeline
statements of different text, which the store's one-round-trip saves need, and a worker
queue's job insert runs on psycopg). Cursors wait on the event loop once per statement and
adapt arguments through Python per value; here a batch waits once and arguments are encoded
by :func:`_encode` (text format, a handful of Python types: what the store passes). Rows come
back through psycopg's own (compiled) loaders, as cursors would give them, and a failed
statement raises psycopg's exception for its SQLSTATE, so error handling is psycopg's. The
batch's exchange runs on libpq's (compiled) generators, waited for by :meth:`~._link.Link.wait`: the
socket alone, without the timer and the cancel request psycopg's own wait adds to every round trip.

A failure (an error answer) fails what follows it up to the batch's end, as PostgreSQL's
pipeline does; the error is raised when the batch is sent. A batch interrupted mid-exchange
(cancelled, a lost connection) closes the connection: the pool discards it.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from operator import itemgetter
from typing import Any, LiteralString, NamedTuple, cast

from psycopg import AsyncConnection, errors, pq
from psycopg.generators import fetch_many, send

from ._link import Link, link_of

Row = tuple[Any, ...]
Args = Sequence[Any] | Mapping[str, Any] | None

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_FATAL = pq.ExecStatus.FATAL_ERROR
_SYNC = b"-- pipeline sync"
"""A queued synchronisation point (:meth:`Wire.commit`), told apart by identity: no statement's text is this object."""
_IDLE = pq.TransactionStatus.IDLE
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")
_MAX_PREPARED = 512
"""Statement shapes prepared per connection at most (the store has a few dozen; more run unprepared)."""
_TEXT, _TEXT_ARRAY, _INT8, _BOOL, _FLOAT8 = 0, 1009, 20, 16, 701
"""The types arguments are declared with: a string as ``unknown`` (PostgreSQL takes it as what it is compared with or
stored into, as psycopg sends it), the rest as what they are."""


class _Sql(NamedTuple):
    text: bytes
    names: tuple[str, ...] | None
    """The arguments' names in ``$n`` order, or ``None`` for positional ``%s``."""
    pick: Callable[[Mapping[str, Any]], Sequence[Any]] | None
    """The named arguments' values in ``$n`` order, taken from their mapping in one call."""


_parsed: dict[str, _Sql] = {}
_names: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
"""A name for each statement shape (its text and argument types), the same on every connection."""


def _parse(query: str) -> _Sql:
    names: list[str] = []
    positional = 0

    def number(match: re.Match[str]) -> str:
        nonlocal positional
        if match.group(0) == "%%":
            return "%"
        if match.group(1) is None:
            positional += 1
            return f"${positional}"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    text = _PLACEHOLDER.sub(number, query)
    if names and positional:
        raise errors.ProgrammingError(f"a statement mixes named and positional arguments: {query[:80]}")
    pick: Callable[[Mapping[str, Any]], Sequence[Any]] | None = None
    if len(names) > 1:
        pick = itemgetter(*names)
    elif names:
        pick = partial(_one, names[0])
    found = _Sql(text.encode(), tuple(names) if names else None, pick)
    _parsed[query] = found
    return found


def _one(name: str, args: Mapping[str, Any]) -> tuple[Any]:
    return (args[name],)


def _array(values: Sequence[object]) -> bytes:
    """A ``text[]`` literal; ids and keys (strings without quotes or backslashes) are joined in one go."""
    if not values:
        return b"{}"
    try:
        raw = "\x00".join(cast("Sequence[str]", values))
    except TypeError:  # an element that is not a string
        return _array_items(values)
    if '"' in raw or "\\" in raw or raw.count("\x00") != len(values) - 1:
        return _array_items(values)  # to escape, or a NUL of its own
    return ('{"' + raw.replace("\x00", '","') + '"}').encode()


def _array_items(values: Sequence[object]) -> bytes:
    items: list[str] = []
    for v in values:
        if v is None:
            items.append("NULL")
        else:
            s = v if isinstance(v, str) else str(v)
            if "\x00" in s:
                raise errors.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
            items.append('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return ("{" + ",".join(items) + "}").encode()


def _encode(args: Sequence[Any]) -> tuple[list[bytes | None], tuple[int, ...]]:
    """Arguments as text-format bytes, and the types they are declared as (exact types first: the usual ones)."""
    values: list[bytes | None] = []
    types: list[int] = []
    for value in args:
        if type(value) is str:
            if "\x00" in value:  # libpq would cut a text argument at its first NUL
                raise errors.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
            values.append(value.encode())
            types.append(_TEXT)
        elif value is None:
            values.append(None)
            types.append(_TEXT)
        elif type(value) is int:
            values.append(str(value).encode())
            types.append(_INT8)
        elif type(value) is bool:
            values.append(b"t" if value else b"f")
            types.append(_BOOL)
        elif type(value) is float:
            values.append(repr(value).encode())
            types.append(_FLOAT8)
        elif type(value) is list or type(value) is tuple:
            values.append(_array(value))  # pyright: ignore[reportUnknownArgumentType]
            types.append(_TEXT_ARRAY)
        else:
            encoded, kind = _subclass(value)
            values.append(encoded)
            types.append(kind)
    return values, tuple(types)


def _subclass(value: object) -> tuple[bytes, int]:
    """An argument of a subclass of the types :func:`_encode` takes (a ``StrEnum``, an ``IntEnum``), as its base."""
    if isinstance(value, str):
        return _encode([str.__str__(value)])[0][0] or b"", _TEXT
    if isinstance(value, bool):
        return (b"t" if value else b"f"), _BOOL
    if isinstance(value, int):
        return int.__repr__(value).encode(), _INT8
    if isinstance(value, float):
        return float.__repr__(value).encode(), _FLOAT8
    if isinstance(value, list | tuple):
        return _array(cast(Sequence[object], value)), _TEXT_ARRAY
    raise errors.ProgrammingError(f"the PostgreSQL store cannot send a {type(value).__name__} argument")


class Answer:
    """A statement's answer: its rows once its batch has gone out (reading one sends the batch)."""

    __slots__ = ("_wire", "_result", "_error", "_rows")

    def __init__(self, wire: Wire) -> None:
        self._wire: Wire | None = wire
        self._result: pq.abc.PGresult | None = None
        self._error: errors.Error | None = None
        self._rows: list[Row] | None = None

    @property
    def pgresult(self) -> pq.abc.PGresult | None:
        """The statement's result if it has come back and succeeded."""
        return self._result

    async def fetchall(self) -> list[Row]:
        if self._wire is not None:
            await self._wire.flush()
        if self._error is not None:
            raise self._error
        if self._rows is None:
            self._rows = []
        return self._rows

    async def fetchone(self) -> Row | None:
        rows = await self.fetchall()
        return rows[0] if rows else None


class _Queued(NamedTuple):
    name: bytes | None
    """The prepared statement's name (``None``: unprepared)."""
    prepare: bool
    """Its ``Parse`` goes out first, in the same batch."""
    sql: bytes
    values: list[bytes | None]
    types: tuple[int, ...]
    answer: Answer


_queued = cast("Callable[[type[_Queued], tuple[Any, ...]], _Queued]", tuple.__new__)  # pyright: ignore[reportUnknownMemberType]
"""Builds a :class:`_Queued` without the Python ``__new__`` a named tuple's class call runs."""


class Wire:
    """One pooled connection's statements (see the module); the store's functions take it where they took a connection.

    ``con`` is the psycopg connection itself (a save's ``then=`` steps get it, after the batch
    so far has gone out).
    """

    __slots__ = ("con", "_queue", "_batching", "_prepared", "_link", "_begin")

    def __init__(self, con: AsyncConnection[Row], link: Link | None = None) -> None:
        self.con = con
        self._queue: list[_Queued] = []
        self._batching = False
        self._begin: bytes | None = None
        self._link = link = link or link_of(con)
        self._prepared = link.prepared

    def lend(self) -> None:
        """Psycopg's own API is about to use the connection (see :meth:`~._link.Link.lend`)."""
        self._link.lend()

    async def execute(self, query: LiteralString | str, args: Args = None, *, prepare: bool = True) -> Answer:
        """Queue ``query`` with ``args`` (sent now outside a batch); ``prepare=False`` for one-off statements."""
        sql = _parsed.get(query) or _parse(query)
        if args is None:
            values, types = [], ()
        elif sql.pick is not None:
            values, types = _encode(sql.pick(args))  # pyright: ignore[reportArgumentType]
        else:
            values, types = _encode(args)  # pyright: ignore[reportArgumentType]
        answer = Answer(self)
        name: bytes | None = None
        first = False
        if prepare:
            key = (sql.text, types)
            name = _names.get(key)
            if name is None and len(_names) < _MAX_PREPARED:
                name = _names[key] = b"interlock_%d" % len(_names)
            if name is not None:
                names = self._prepared
                first = name not in names
                names.add(name)  # prepared by this batch (taken back if it fails)
        self._queue.append(_queued(_Queued, (name, first, sql.text, values, types, answer)))
        if not self._batching:
            await self.flush()
        return answer

    @asynccontextmanager
    async def batch(self) -> AsyncGenerator[None]:
        """Queue statements until the block ends (or an answer is read), then send them in one round trip.

        If the block raises, what it queued is dropped unsent.
        """
        self._batching = True
        try:
            yield
        except BaseException:
            self.drop_batch()
            raise
        await self.end_batch()

    def start_batch(self, begin: bytes | None = None) -> None:
        """What :meth:`batch` does on entry: queue statements from now on (for callers without a ``with`` block).

        ``begin``: the batch is a transaction, opened by this statement only if part of the batch
        goes out before its end (an answer read mid-transaction: the part sent first must not
        commit alone). A batch that goes out whole is the implicit transaction PostgreSQL runs up
        to a pipeline's synchronisation point, which :meth:`commit` places.
        """
        self._batching = True
        self._begin = begin

    async def commit(self) -> Answer:
        """End the transaction :meth:`start_batch` opened: ``COMMIT`` if it began, else a synchronisation point.

        The answer has a result once the batch has gone out if, and only if, the transaction committed.
        """
        if self._begin is None:
            return await self.execute("COMMIT", prepare=False)
        self._begin = None
        answer = Answer(self)
        self._queue.append(_queued(_Queued, (None, False, _SYNC, [], (), answer)))
        return answer

    async def end_batch(self) -> None:
        """What :meth:`batch` does when its block ends: send what was queued, and queue no more."""
        self._batching = False
        await self.flush()

    def drop_batch(self) -> None:
        """What :meth:`batch` does when its block raises: drop what was queued, and queue no more."""
        self._batching = False
        self._begin = None
        self.discard()

    def discard(self) -> None:
        """Drop the statements queued and not sent."""
        names = self._prepared
        for q in self._queue:
            q.answer._wire = None  # pyright: ignore[reportPrivateUsage]
            if q.prepare and q.name is not None:
                names.discard(q.name)
        self._queue.clear()

    @property
    def idle(self) -> bool:
        """No transaction is open on the connection."""
        return self.con.pgconn.transaction_status == _IDLE

    async def flush(self) -> None:
        """Send the queued statements in one round trip and give each its answer; raise the first error."""
        queue = self._queue
        if not queue:
            return
        self._queue = []
        if self._batching and self._begin is not None:  # part of a transaction goes out before its end: begin it
            queue.insert(0, _queued(_Queued, (None, False, self._begin, [], (), Answer(self))))
            self._begin = None
        pg = self.con.pgconn
        pg.enter_pipeline_mode()
        done = False
        try:
            expected = 0
            for q in queue:  # into libpq's buffer (the connection does not block): sent together below
                if q.name is None:
                    if q.sql is _SYNC:
                        pg.pipeline_sync()
                    else:
                        pg.send_query_params(q.sql, q.values, q.types or None)
                elif q.prepare:
                    pg.send_prepare(q.name, q.sql, q.types or None)
                    pg.send_query_prepared(q.name, q.values)
                    expected += 1
                else:
                    pg.send_query_prepared(q.name, q.values)
                expected += 1
            if queue[-1].sql is not _SYNC:
                pg.pipeline_sync()
                expected += 1
            results = await self._link.wait(_exchange(pg, expected))
            pg.exit_pipeline_mode()  # fails if results are left (an answer more than expected): closed below
            done = True
        finally:
            if not done:  # results still on the way: the connection cannot be used again
                self._link.lend()
                pg.finish()
        self._settle(queue, results)

    def _settle(self, queue: list[_Queued], results: list[list[pq.abc.PGresult]]) -> None:
        names = self._prepared
        loader = self._link.loader
        encoding = self.con.pgconn._encoding  # pyright: ignore[reportPrivateUsage]
        first: errors.Error | None = None
        at = 0
        for q in queue:
            if q.prepare:
                prepared = results[at][-1]
                at += 1
                if prepared.status != pq.ExecStatus.COMMAND_OK and q.name is not None:
                    names.discard(q.name)
                if prepared.status == _FATAL:
                    first = first or errors.error_from_result(prepared, encoding=encoding)
            answer = q.answer
            answer._wire = None  # pyright: ignore[reportPrivateUsage]
            result = results[at][-1]
            at += 1
            if q.sql is _SYNC:  # the implicit transaction's end: committed unless a statement before it failed
                if first is None:
                    answer._result = result  # pyright: ignore[reportPrivateUsage]
                continue
            if result.status in _OK:
                answer._result = result  # pyright: ignore[reportPrivateUsage]
                if result.ntuples:
                    loader.set_pgresult(result)
                    answer._rows = loader.load_rows(0, result.ntuples, tuple)  # pyright: ignore[reportPrivateUsage]
                continue
            if result.status == _FATAL:
                error = errors.error_from_result(result, encoding=encoding)
            else:  # skipped after an earlier failure
                error = errors.PipelineAborted("an earlier statement of the batch failed")
            answer._error = error  # pyright: ignore[reportPrivateUsage]
            first = first or error
        if first is not None:
            raise first


def _exchange(pg: pq.abc.PGconn, expected: int) -> Any:
    """Send what libpq holds, then read ``expected`` result lists: one per statement sent, and the sync's.

    While sending, answers that come back are read (the server may answer before it has all).
    """
    yield from send(pg)
    results: list[list[pq.abc.PGresult]] = []
    while len(results) < expected:
        results.append((yield from fetch_many(pg)))
    return results
