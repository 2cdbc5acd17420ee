"""The SQLite store's worker thread: one connection, work taken in batches, writes committed as a group.

Callers on any event loop :meth:`Worker.submit` a job and await its future. The thread
takes every job waiting when it wakes (a *batch*) and runs:

* the reads in one read transaction (one consistent version of the file);
* the writes in write transactions (``BEGIN IMMEDIATE`` … ``COMMIT``): *group commit*. Those
  that need no flush (:data:`Job.durable` false) commit together with ``synchronous=NORMAL``,
  then the durable ones together with ``synchronous=FULL``: one fsync for them all. A group's
  writes run one after another under one savepoint; if one raises (an updater's refusal, a
  fencing conflict, a bad value), the group's work is rolled back to it and each write runs
  again under a ``SAVEPOINT`` of its own, so the one that raises is rolled back alone and fails
  alone, and the others commit together (updaters are pure, and may run again). If an error
  ends the whole transaction (SQLite rolls back on some I/O and disk-full errors), the write
  that raised fails and the others run again in a new transaction;
* the other calls (opening, closing), one by one.

A failing ``COMMIT`` or ``ROLLBACK`` (a damaged page, an I/O error) fails the jobs it concerns
and leaves no transaction open (the connection is reopened if rolling back fails too): the
thread goes on serving. Should it die all the same (a bug), every waiting and later job fails
at once with the error ``died`` makes (:attr:`Worker.dead`), instead of waiting for ever.

Each group's futures are resolved once its outcomes are final (the reads' after their
transaction, a write group's after its ``COMMIT`` returned), with one hand-off per event loop:
no write is acknowledged before the ``COMMIT`` that made it durable returned, exactly as when
every save had a transaction of its own, and a read or a write that needs no flush does not
wait for the durable group's fsync.

Reordering within a batch is safe: every job in it was submitted before any of them
finished, so none can depend on another's result.

WAL housekeeping: SQLite's own checkpoints (which run inside a ``COMMIT``, on the hot
path) are off; after a batch, the worker runs ``wal_checkpoint(PASSIVE)`` itself when the
frames waiting in the WAL pass :attr:`Worker.wal_soft` bytes and no job is waiting, or
:attr:`Worker.wal_hard` whatever is waiting. The file keeps its size, so the log starts
again over blocks it already has (see :mod:`._wal`); once the worker has had nothing to do
for :attr:`Worker.idle_after` seconds, it truncates a file past :attr:`Worker.wal_soft`
(``TRUNCATE``). It never waits for another process's readers: if they keep the WAL busy, it
copies what it can and tries again :attr:`Worker.busy_backoff` commits later (or idle
seconds later, to truncate).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._errors import is_busy
from ._wal import WalIndex

JobKind = Literal["read", "write", "call"]

_log = logging.getLogger("interlock.stores.sqlite")


@dataclass(slots=True, eq=False)
class Job:
    """One piece of work for the worker: ``fn(con, *args)`` (``fn(*args)`` for a ``call``)."""

    kind: JobKind
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    durable: bool = True
    """A write that must be flushed to disk before it is acknowledged (else: survive a process crash)."""
    ok: bool = False
    value: Any = None
    error: BaseException | None = field(default=None, repr=False)

    def run(self, *con: sqlite3.Connection) -> None:
        try:
            self.succeed(self.fn(*con, *self.args))
        except BaseException as exc:  # delivered to the caller, whatever it is
            self.fail(exc)

    def succeed(self, value: Any) -> None:
        self.ok, self.value, self.error = True, value, None

    def fail(self, exc: BaseException) -> None:
        self.ok, self.value, self.error = False, None, exc


def _hand_back(batch: list[Job]) -> None:
    """Hand each job's outcome to its caller's event loop: one hand-off per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Job]] = {}
    for job in batch:
        by_loop.setdefault(job.loop, []).append(job)
    for loop, jobs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, jobs)
        except RuntimeError:  # the loop is closed: nobody waits for these
            pass


def _settle(jobs: list[Job]) -> None:
    """On the caller's loop: hand each job's outcome to its future (unless the caller gave up waiting)."""
    for job in jobs:
        if job.future.done():
            continue
        if job.ok:
            job.future.set_result(job.value)
        else:
            job.future.set_exception(job.error or RuntimeError("the SQLite worker lost a job's outcome"))


class Worker:
    """The thread that owns one connection (``connect()`` returns it, opening it on first use)."""

    wal_soft = 4 << 20
    """WAL bytes waiting to be copied past which a checkpoint runs when no job is waiting.

    About SQLite's own default (a checkpoint per 1000 pages). A checkpoint costs three fsyncs (the
    log's before copying, the database's after, the log's header when the log starts again) and
    copies each page once however often the log holds it: measured over 1000 interrupt cycles,
    1 MiB made 106 checkpoints (0.33 fsyncs per cycle beside the cycle's 3), 4 MiB 27 (0.09),
    with fewer page copies too.
    """
    wal_hard = 8 << 20
    """WAL bytes waiting to be copied past which a checkpoint runs after a batch, whatever is waiting."""
    idle_after = 1.0
    """Seconds without a job after which a WAL file larger than :attr:`wal_soft` is truncated."""
    busy_backoff = 100
    """Commits to wait before trying again, when another connection kept a checkpoint from finishing."""
    lock_wait = 30.0
    """Seconds the thread waits for another connection's lock before a transaction fails (see :func:`wait_for`)."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        wal: WalIndex | None,
        *,
        name: str,
        reset: Callable[[], None],
        died: Callable[[BaseException], Exception],
    ) -> None:
        self._connect = connect
        self._reset = reset
        """Closes the connection (the next ``connect()`` opens a new one)."""
        self._died = died
        """The error for every job once the thread has died of the given exception."""
        self.dead: Exception | None = None
        """Set when the thread has died: the error every job gets."""
        self._batch: list[Job] = []
        self._wal = wal
        self._name = name
        self._queue: queue.SimpleQueue[list[Job] | None] = queue.SimpleQueue()
        self._pending: dict[asyncio.AbstractEventLoop, list[Job]] = {}
        """Jobs each event loop submitted since it last ran :meth:`_flush` (queued by it, as one)."""
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._busy = threading.Lock()
        """Held while the connection is in use: by the thread for each batch, by :meth:`run_here`."""
        self._synchronous = "FULL"
        self.never_waits = False
        """Whether the connection fails at once on a lock taken (``busy_timeout = 0``, set by whoever opens it
        on a WAL or in-memory file): only then may :meth:`run_here` and :meth:`read_here` use it."""
        self._retry_after = 0  # a checkpoint found the WAL busy: not before this many commits
        self._wal_large = False  # the WAL file was past wal_soft after the last batch
        self.commits = 0
        """Write transactions committed."""
        self.flushes = 0
        """Write transactions committed with ``synchronous=FULL`` (one fsync each)."""
        self.writes = 0
        """Write jobs committed."""
        self.checkpoints = 0
        """WAL checkpoints that copied every frame (and, idle, truncated the file)."""

    def run_here(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
        """Run a one-statement write that needs no fsync on the caller's thread, if the worker is idle.

        ``(True, value)`` when it ran; ``(False, None)`` when the worker is busy or has work queued
        (or submitted, not yet queued: then it joins that batch, where it costs less than a
        transaction of its own), or another connection holds the write lock (no waiting for it
        here: the caller's event loop must not block): then :meth:`submit` it. Saves the two thread
        hand-offs, which cost more than such a write. ``fn`` must make its change with one
        statement, which is then its own transaction (autocommit): a lock refused at it changes nothing.
        """
        return self._here(fn, args, write=True)

    def read_here(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
        """Run a one-statement read on the caller's thread, if the worker is idle (as :meth:`run_here`).

        ``(False, None)`` when the worker is busy or has work queued or submitted, or the file
        cannot be read at once (another connection recovering the WAL): then :meth:`submit` it.
        ``fn`` must read with one statement, which is then its own read transaction (one version
        of the file), and no more than it may cost the event loop (no base chain of histories).
        """
        return self._here(fn, args, write=False)

    def _here(self, fn: Callable[..., Any], args: tuple[Any, ...], *, write: bool) -> tuple[bool, Any]:
        if self.dead is not None or self._pending or not self._queue.empty():
            return False, None
        if not self._busy.acquire(blocking=False):
            return False, None
        try:
            if not self._queue.empty():
                return False, None
            con = self._connect()
            if not self.never_waits:
                return False, None
            try:
                if write:
                    self._set_synchronous(con, "NORMAL")
                value = fn(con, *args)  # the connection never waits for a lock (see wait_for)
            except sqlite3.OperationalError as exc:
                if is_busy(exc):  # the write lock is taken (or the WAL index is being recovered)
                    return False, None
                raise
            if write:
                self.commits += 1
                self.writes += 1
            return True, value
        finally:
            self._busy.release()

    def submit(self, kind: JobKind, fn: Callable[..., Any], args: tuple[Any, ...], *, durable: bool = True) -> Job:
        """Queue a job (from a running event loop); await ``job.future`` for its outcome.

        The jobs a loop submits in one pass over its ready callbacks reach the thread together,
        when that pass ends (:meth:`_flush`): one wake-up for them all, and the thread takes them
        as one batch once the loop has nothing more to run, instead of starting on the first
        while the loop still runs Python (the two would then take turns at the interpreter
        lock, a statement at a time).
        """
        loop = asyncio.get_running_loop()
        job = Job(kind, fn, args, loop, loop.create_future(), durable)
        self._start()
        pending = self._pending.get(loop)
        if pending is None:
            self._pending[loop] = [job]
            loop.call_soon(self._flush, loop)
        else:
            pending.append(job)
        return job

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """On ``loop``: queue the jobs it submitted since its last flush, for the thread."""
        self._queue.put(self._pending.pop(loop, []))
        if self.dead is not None:  # nobody takes them: fail them (and any other left in the queue)
            self._fail_queued(self.dead)

    def stop(self) -> None:
        """Let the thread finish what is queued and exit; waits for it."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
                self._thread.start()

    # on the worker thread ---------------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._serve()
        except BaseException as exc:  # a bug: fail every job, now and later, rather than leave them waiting
            _log.error("the SQLite worker thread %r died: its store fails every call now", self._name, exc_info=exc)
            self.dead = self._died(exc)
            for job in self._batch:
                job.fail(self.dead)
            _hand_back(self._batch)
            self._fail_queued(self.dead)

    def _fail_queued(self, error: Exception) -> None:
        """Fail every job in the queue with ``error`` (the thread is gone)."""
        jobs: list[Job] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            for job in item or ():
                job.fail(error)
                jobs.append(job)
        _hand_back(jobs)

    def _serve(self) -> None:
        while True:
            batch: list[Job] = []
            self._batch = batch
            item = self._next()
            stopping = item is None
            batch += item or ()
            while not stopping:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                stopping = item is None
                batch += item or ()
            due = False
            if batch:
                with self._busy:
                    self._execute(batch)
                    due = self._look_at_wal()  # before the hand-back: see _look_at_wal
                self._answer(self._batch)  # after the lock: a caller woken by it may run a write here at once
            if stopping:
                return
            if due:
                with self._busy:
                    self._checkpoint()

    def _look_at_wal(self) -> bool:
        """Whether a checkpoint is due; notes whether the file is left large (for :meth:`_next`).

        Called before a batch's hand-back: its system calls release the GIL, which the callers
        woken by the hand-back would take each time (a thread switch per call).
        """
        if self._wal is None:
            return False
        self._wal_large = self._wal.file_bytes() > self.wal_soft
        return self._wal_past(self.wal_soft if self._queue.empty() else self.wal_hard)

    def _next(self) -> list[Job] | None:
        """The next item of the queue; while waiting for it, truncate a WAL file left large once idle."""
        while self._wal_large:
            try:
                return self._queue.get(timeout=self.idle_after)
            except queue.Empty:
                with self._busy:
                    if not self._checkpoint(truncate=True):
                        break  # another connection reads the log: wait for work, and try after it
                    self._wal_large = False
        return self._queue.get()

    def _execute(self, batch: list[Job]) -> None:
        """Run ``batch`` in groups: its reads, its writes that need no flush, its durable writes, its calls.

        Each group but the last is answered as soon as its outcomes are final, so a read or a
        write that needs no flush does not wait for the durable group's fsync (the last group
        is answered once the connection is free again: see :meth:`_serve`).
        """
        if len(batch) == 1:  # the usual batch when calls do not overlap: one group
            self._run_group(batch)
            return
        groups = [
            [job for job in batch if job.kind == "read"],
            [job for job in batch if job.kind == "write" and not job.durable],
            [job for job in batch if job.kind == "write" and job.durable],
            [job for job in batch if job.kind == "call"],
        ]
        groups = [group for group in groups if group]
        for i, group in enumerate(groups):
            self._run_group(group)
            if i < len(groups) - 1:
                self._answer(group)

    def _run_group(self, jobs: list[Job]) -> None:
        """Run jobs of one kind: reads in one read transaction, writes in one write transaction, calls alone."""
        if jobs[0].kind == "read":
            self._read(jobs)
        elif jobs[0].kind == "write":
            todo = jobs
            while todo:
                todo = self._write(todo)
        else:
            for job in jobs:
                job.run()

    def _answer(self, jobs: list[Job]) -> None:
        """Hand ``jobs``' outcomes (final now) back to their callers; the rest of the batch waits for its own."""
        if jobs:
            _hand_back(jobs)
            answered = set(jobs)
            self._batch = [job for job in self._batch if job not in answered]

    def _read(self, jobs: list[Job]) -> None:
        try:
            con = self._connect()
            con.execute("BEGIN")
        except BaseException as exc:
            for job in jobs:
                job.fail(exc)
            return
        try:
            wait_for(con, "PRAGMA schema_version", self.lock_wait)  # starts the read transaction (its locks)
        except BaseException as exc:
            for job in jobs:
                job.fail(exc)
            self._end(con, "ROLLBACK")
            return
        for job in jobs:
            job.run(con)
        self._end(con, "COMMIT")  # a read transaction: its end changes nothing the jobs read

    def _write(self, jobs: list[Job]) -> list[Job]:
        """Run ``jobs`` in one transaction; returns those to run again (an error ended the transaction).

        They run together first, with no savepoint each (the common case: none fails). If one
        fails, the group's work is rolled back and each runs again under a savepoint of its own.
        """
        try:
            con = self._connect()
            self._set_synchronous(con, "FULL" if any(job.durable for job in jobs) else "NORMAL")
            wait_for(con, "BEGIN IMMEDIATE", self.lock_wait)
        except BaseException as exc:
            for job in jobs:
                job.fail(exc)
            return []
        failed = _together(con, jobs)
        applied = jobs
        if failed is not None and len(jobs) == 1:  # alone in its transaction: the transaction is its savepoint
            self._end(con, "ROLLBACK")
            return []
        if failed is not None:
            if not self._undo(con, "together"):  # the transaction is gone, and the others' work with it
                return [job for job in jobs if job is not failed]
            applied, again = self._each_alone(con, jobs)
            if again:
                return again
        error = self._end(con, "COMMIT")
        if error is not None:
            for job in applied:
                job.fail(error)
            return []
        self.commits += 1
        self.flushes += self._synchronous == "FULL"
        self.writes += len(applied)
        return []

    def _each_alone(self, con: sqlite3.Connection, jobs: list[Job]) -> tuple[list[Job], list[Job]]:
        """Run each job under its own savepoint: those applied, and those to run again (the transaction is gone)."""
        applied: list[Job] = []
        for i, job in enumerate(jobs):
            _in_savepoint(con, job)
            if job.ok:
                applied.append(job)
            elif not self._undo(con, "job"):
                return applied, [*applied, *jobs[i + 1 :]]
        return applied, []

    def _undo(self, con: sqlite3.Connection, savepoint: str) -> bool:
        """Roll back to ``savepoint`` and release it; ``False`` if the transaction itself is gone (or now ended)."""
        if not con.in_transaction:
            return False
        try:
            con.execute(f"ROLLBACK TO {savepoint}")
            con.execute(f"RELEASE {savepoint}")
        except sqlite3.Error:
            self._end(con, "ROLLBACK")
            return False
        return True

    def _end(self, con: sqlite3.Connection, sql: Literal["COMMIT", "ROLLBACK"]) -> sqlite3.Error | None:
        """End the transaction with ``sql``; the error if that failed. Leaves no transaction open, whatever happens.

        A ``COMMIT`` that fails is rolled back; if rolling back fails too (or leaves the
        transaction open), the connection is closed, and the next job opens a new one.
        """
        error: sqlite3.Error | None = None
        try:
            if con.in_transaction:
                con.execute(sql)
        except sqlite3.Error as exc:
            error = exc
        if con.in_transaction:
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        if con.in_transaction:
            self._reset()
            self._synchronous = "FULL"  # what a new connection starts with
        return error

    def _set_synchronous(self, con: sqlite3.Connection, level: str) -> None:
        """Set the level the next commit flushes at (a statement only when it changes: four per interrupt cycle).

        It is SQLite's to flush: with ``FULL`` it syncs the log before the commit becomes visible to
        other connections. Staying at ``NORMAL`` and syncing the log ourselves after ``COMMIT`` would
        save the statements, but let another process read (and act on) a commit a power cut could undo.
        """
        if level != self._synchronous:
            con.execute(f"PRAGMA synchronous = {level}")
            self._synchronous = level

    def _wal_past(self, limit: int) -> bool:
        """Whether the WAL's frames not yet copied pass ``limit`` bytes (and no busy checkpoint asked to wait)."""
        if self._wal is None or self.commits < self._retry_after:
            return False
        return self._wal.pending_bytes() >= limit

    def _checkpoint(self, *, truncate: bool = False) -> bool:
        """Copy the WAL's frames into the database (and ``truncate`` the file); never waits for other processes.

        ``True`` when every frame was copied (and the file truncated).
        """
        try:
            con = self._connect()
        except sqlite3.Error:
            return False
        try:  # never waiting for other connections (see wait_for)
            busy, frames, copied = con.execute(
                "PRAGMA wal_checkpoint(TRUNCATE)" if truncate else "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchone()
            if busy and truncate:  # another connection reads an older version: copy what can be
                busy, frames, copied = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                busy = 1
        except sqlite3.Error:
            return False  # housekeeping only: the next commit says what is wrong, if anything is
        if busy or copied < frames:  # try again later
            self._retry_after = self.commits + self.busy_backoff
            return False
        self.checkpoints += 1
        return True


def _together(con: sqlite3.Connection, jobs: list[Job]) -> Job | None:
    """Run ``jobs`` one after another, under one savepoint (``together``) when there are several.

    Stops at the first that fails and returns it (the caller rolls back to the savepoint);
    ``None`` when every one succeeded (the savepoint is left open: ``COMMIT`` ends it).
    """
    if len(jobs) > 1:
        try:
            con.execute("SAVEPOINT together")
        except sqlite3.Error as exc:
            jobs[0].fail(exc)
            return jobs[0]
    for job in jobs:
        job.run(con)
        if not job.ok:
            return job
    return None


def _in_savepoint(con: sqlite3.Connection, job: Job) -> None:
    """Run a write under its own savepoint (released if it succeeds; see :meth:`Worker._undo` if not)."""
    try:
        con.execute("SAVEPOINT job")
    except sqlite3.Error as exc:
        job.fail(exc)
        return
    job.run(con)
    if job.ok:
        try:
            con.execute("RELEASE job")
        except sqlite3.Error as exc:
            job.fail(exc)


_PAUSES = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.025, 0.025, 0.05, 0.05, 0.1)
"""Seconds between tries of :func:`wait_for` (SQLite's own busy handler's; the last repeats)."""


def wait_for(con: sqlite3.Connection, sql: str, limit: float) -> None:
    """Run ``sql``, which takes a lock, trying again while another connection holds it, for ``limit`` seconds at most.

    The store's connection has no busy timeout (``busy_timeout = 0``): a statement that finds a
    lock taken fails at once, never waiting inside SQLite. That is what the caller's thread needs
    (:meth:`Worker.run_here`: its event loop must not block), and the worker waits here instead,
    where its transactions take their locks (``BEGIN IMMEDIATE``, a read's first statement), as
    SQLite's busy handler would: so no statement toggles the timeout per call. Inside a WAL
    transaction no statement waits for a lock (``COMMIT`` included; SQLite's own checkpoints are off).
    """
    deadline = time.monotonic() + limit
    for tries in itertools.count():
        try:
            con.execute(sql)
            return
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if not is_busy(exc) or left <= 0:
                raise
        time.sleep(min(_PAUSES[min(tries, len(_PAUSES) - 1)], left))
