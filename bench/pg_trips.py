"""What one interrupt cycle sends to PostgreSQL: statements, round trips and transactions.

Run with ``python bench/pg_trips.py [--cycles N] [--verbose]``. It starts a throwaway cluster
(``scripts/postgres.sh``, fsync off: the counts do not depend on durability) and traces every
connection's protocol with libpq's own tracer (``PQtrace``), so the counts are what went over
the wire, whatever psycopg did above it:

* **statements**: the queries executed (an extended-protocol ``Execute`` or a simple
  ``Query``), ``BEGIN`` and ``COMMIT`` included;
* **round trips**: how often the client sent something and then waited for the server's
  answer (a change of direction in the trace, from client messages to server messages);
* **transactions**: the ``BEGIN`` statements, and the pipelines of several statements that ran as the
  implicit transaction up to their ``Sync`` (a save whose statements all go out at once has no ``BEGIN``).

Printed per cycle (a pause, then a fresh agent over the same store loads and resumes: the
cycle of ``bench/agents.py``; with ``--http`` the two requests of ``bench/served_bank.py``'s
cycle, answered in process by an :class:`~interlock.http._server.AgentServer`), with the store
calls the cycle made, and with ``--verbose`` each statement's text and how often a cycle sent it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextvars
import functools
import os
import re
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from agents import one_cycle
from postgres import Cluster

from interlock.stores.postgres import PostgresStore

Con = psycopg.AsyncConnection[Any]
_traced: list[tuple[Con, str]] = []
_parsed: dict[str, dict[str, str]] = collections.defaultdict(dict)
"""Per trace file: prepared statement name -> its text (a statement is parsed once, then bound many times)."""
_calls: collections.Counter[str] = collections.Counter()
_by_call: collections.Counter[str] = collections.Counter()
"""Round trips per store call, in the order a cycle makes them (``--by-call``: each call's traces read after it)."""
_order: list[str] = []
_BY_CALL = contextvars.ContextVar("by_call", default=False)
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_CALLS = ("load", "latest", "save", "save_all", "journal_get", "journal_put", "journal_entries", "list", "ready")


def _start_trace(con: Con, path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    con.pgconn.trace(fd)
    con.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)


def _trace_connections(folder: str) -> Callable[[], None]:
    """Trace every connection psycopg opens from now on, each into its own file under ``folder``; returns the undo."""
    saved = psycopg.AsyncConnection.__dict__["connect"]
    original = psycopg.AsyncConnection.connect.__func__

    async def connect(cls: type[Con], *args: Any, **kwargs: Any) -> Any:
        con = await original(cls, *args, **kwargs)
        path = os.path.join(folder, f"{len(_traced)}.trace")
        _start_trace(con, path)
        _traced.append((con, path))
        return con

    psycopg.AsyncConnection.connect = classmethod(connect)  # type: ignore[method-assign,assignment]

    def undo() -> None:
        psycopg.AsyncConnection.connect = saved
        _traced.clear()

    return undo


def _count_calls(store: PostgresStore) -> None:
    """Count the store methods the agent calls (the outermost ones: ``save`` calls ``save_all``)."""
    depth: contextvars.ContextVar[int] = contextvars.ContextVar("depth", default=0)
    for name in _CALLS:
        method: Callable[..., Awaitable[Any]] = getattr(store, name)

        async def counted(*args: Any, _m: Callable[..., Awaitable[Any]] = method, _n: str = name, **kw: Any) -> Any:
            outer = depth.get() == 0
            if outer:
                _calls[_n] += 1
            token = depth.set(depth.get() + 1)
            try:
                return await _m(*args, **kw)
            finally:
                depth.reset(token)
                if outer and _BY_CALL.get():
                    step = f"{len(_order)}. {_n}"
                    _order.append(step)
                    _by_call[step] += _read_traces().trips

        setattr(store, name, functools.wraps(method)(counted))


class Counts:
    def __init__(self) -> None:
        self.statements = 0
        self.trips = 0
        self.begins = 0
        self.texts: collections.Counter[str] = collections.Counter()


def _read_traces() -> Counts:
    """Parse (and restart) every open connection's trace: the totals since the last call."""
    counts = Counts()
    for con, path in _traced:
        if con.closed:
            continue
        con.pgconn.untrace()  # flushes libpq's stream
        with open(path) as f:
            lines = re.split(r"\n(?=[FB]\t)", f.read())  # a message's SQL text may span lines
        _start_trace(con, path)
        last = "B"
        parsed = _parsed[path]
        bound = "?"
        since, explicit = 0, False  # statements since the last Sync; inside BEGIN ... COMMIT
        for line in lines:
            fields = line.split("\t", 3)
            direction = fields[0]
            if direction == "F" and last == "B":
                counts.trips += 1
            if direction in ("F", "B"):
                last = direction
            if direction != "F" or len(fields) < 3:
                continue
            kind = fields[2]
            quoted = _QUOTED.findall(fields[3] if len(fields) > 3 else "")
            if kind == "Sync":
                counts.begins += since > 1 and not explicit  # an implicit transaction of several statements
                since = 0
            elif kind == "Parse" and len(quoted) >= 2:
                parsed[quoted[0]] = quoted[1]
            elif kind == "Bind" and len(quoted) >= 2:
                bound = parsed.get(quoted[1], "?")
            elif kind in ("Execute", "Query"):
                text = bound if kind == "Execute" else (quoted[0] if quoted else "?")
                counts.statements += 1
                counts.texts[" ".join(text.split())[:100]] += 1
                since += 1
                word = text.strip().upper()
                if word.startswith("BEGIN"):
                    counts.begins += 1
                    explicit = True
                elif word.startswith(("COMMIT", "ROLLBACK")):
                    explicit, since = False, 0
    return counts


def _http_cycle(store: PostgresStore) -> Callable[[], Awaitable[None]]:
    """bench/served_bank.py's cycle: the turn that pauses, then the resume by snapshot id, as HTTP requests."""
    import httpx
    from bank import transfer
    from served_bank import PAUSE_BODY, BankModel, resume_body

    from interlock import PromptAgent
    from interlock.http._server import AgentServer

    app = AgentServer([PromptAgent("bank", BankModel(), tools=[transfer], store=store)])
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench")
    headers = {"content-type": "application/json", "accept": "application/json"}

    async def cycle() -> None:
        paused = (await http.post("/bank", content=PAUSE_BODY, headers=headers)).json()["result"]
        assert paused["finishReason"] == "interrupted", paused
        body = resume_body(str(paused["snapshotId"]))
        done = (await http.post("/bank", content=body, headers=headers)).json()["result"]
        assert done["finishReason"] == "stop", done

    return cycle


async def trips_per_cycle(dsn: str, cycles: int = 20) -> float:
    """The round trips of ``bench/agents.py``'s cycle on a store of ``dsn`` (traced only for this count)."""
    with tempfile.TemporaryDirectory() as folder:
        undo = _trace_connections(folder)
        try:
            async with PostgresStore(dsn, max_size=4) as store:
                for _ in range(10):
                    await one_cycle(store)
                _read_traces()
                for _ in range(cycles):
                    await one_cycle(store)
                return _read_traces().trips / cycles
        finally:
            undo()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--http", action="store_true", help="the cycle as HTTP requests to an AgentServer")
    parser.add_argument("--by-call", action="store_true", help="the round trips of each store call, in order")
    args = parser.parse_args()
    n = args.cycles
    cluster = Cluster(durable=False)
    try:
        with tempfile.TemporaryDirectory() as folder:
            _trace_connections(folder)
            store = PostgresStore(cluster.dsn, max_size=4)
            await store.setup()
            _count_calls(store)
            cycle = _http_cycle(store) if args.http else (lambda: one_cycle(store))
            try:
                for _ in range(10):  # warm: connections, prepared statements, caches
                    await cycle()
                _read_traces()
                _calls.clear()
                for _ in range(n):
                    await cycle()
                counts = _read_traces()
                calls = dict(_calls)
                if args.by_call:
                    _BY_CALL.set(True)
                    for _ in range(n):
                        _order.clear()
                        await cycle()
                        _by_call["(between calls)"] += _read_traces().trips
            finally:
                await store.close()
    finally:
        cluster.stop()
    print(f"one interrupt cycle on PostgreSQL (mean of {n}), what the client sent:")
    print(
        f"  statements {counts.statements / n:5.1f}   round trips {counts.trips / n:5.1f}   "
        f"transactions {counts.begins / n:4.1f}"
    )
    print("  store calls: " + ", ".join(f"{k} {v / n:g}" for k, v in sorted(calls.items())))
    if args.by_call:
        print("  round trips by store call, in the cycle's order:")
        for step, k in _by_call.items():
            print(f"  {k / n:5.2f}  {step}")
    if args.verbose:
        for text, k in counts.texts.most_common():
            print(f"  {k / n:5.2f}  {text}")


if __name__ == "__main__":
    asyncio.run(main())
