"""SQLite failures as interlock errors: transient ones UNAVAILABLE, permanent ones what to fix.

Only a busy or locked database (or an I/O hiccup) is worth retrying; a read-only file, a
missing directory, a full disk, a damaged file or a table that is not ours stays that way
until someone changes it, and the message says what to change.

A full disk is RESOURCE_EXHAUSTED, whichever way SQLite reports it: ``SQLITE_FULL`` (no space
left, or a short write), or a failed write (``SQLITE_IOERR_WRITE``, …) when the store's file
has reached this process's file size limit (``EFBIG``) or its file system has no room left.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys

from ...errors import (
    DataLossError,
    FailedPreconditionError,
    InterlockError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnavailableError,
)
from ._schema import COLUMNS, SESSIONS, TABLE

_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL})
_WRITES = frozenset(
    {
        sqlite3.SQLITE_IOERR_WRITE,
        sqlite3.SQLITE_IOERR_TRUNCATE,
        sqlite3.SQLITE_IOERR_SHMSIZE,
        sqlite3.SQLITE_IOERR_FSYNC,
    }
)
"""The I/O errors of a write that a full disk (or file size limit) explains."""
_ROOM = 1 << 20
"""Bytes within which a file is taken to be at its size limit, or a file system to be full."""
_LAYOUT_WORDS = ("no such column", "no such table", "has no column")


def _code(exc: sqlite3.Error) -> int | None:
    """The (extended) result code of ``exc``, if SQLite gave one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code if isinstance(code, int) else None


def _primary(exc: sqlite3.Error) -> int | None:
    """The primary result code of ``exc`` (its extended code's low byte), if SQLite gave one."""
    code = _code(exc)
    return None if code is None else code & 0xFF


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another connection holds a lock (``SQLITE_BUSY`` or ``SQLITE_LOCKED``)."""
    return _primary(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def sqlite_error(exc: sqlite3.Error, path: str) -> InterlockError:
    """The interlock error for a failure of the SQLite store at ``path``."""
    primary = _primary(exc)
    where = f"the SQLite store at {path!r}"
    text = str(exc)
    if (full := _full(exc, path, where)) is not None:
        return full
    if primary in _BUSY or (primary is None and "locked" in text):
        return UnavailableError(f"{where} is busy ({text}); retrying may help")
    if primary == sqlite3.SQLITE_IOERR:
        return UnavailableError(
            f"{where} could not read or write its file ({text}); retrying may help (if it keeps failing, "
            "check the disk)"
        )
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return PermissionDeniedError(
            f"{where} cannot be written ({text}); make the file and its directory writable by this process, "
            "or use another path"
        )
    if primary == sqlite3.SQLITE_CANTOPEN:
        return FailedPreconditionError(
            f"{where} cannot be opened ({text}); check that its directory exists and is writable, or use another path"
        )
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or not isinstance(exc, sqlite3.OperationalError):
        return DataLossError(f"{where} is not a usable database ({text}); restore it from a backup or use another path")
    if any(word in text for word in _LAYOUT_WORDS):
        return _foreign(path, text)
    return FailedPreconditionError(f"{where} failed ({text})")


def _full(exc: sqlite3.Error, path: str, where: str) -> ResourceExhaustedError | None:
    """RESOURCE_EXHAUSTED if ``exc`` says the disk (or a size limit) is full, or a failed write is explained so."""
    full = _primary(exc) == sqlite3.SQLITE_FULL
    if not full and _code(exc) not in _WRITES:
        return None
    why = _no_room(path)
    if why is None and not full:
        return None
    return ResourceExhaustedError(
        f"{where} is full ({exc}; {why or 'its disk, or a size limit, has no room left'}): free disk space "
        "(or raise the file size limit), then retry"
    )


def _no_room(path: str) -> str | None:
    """Why the store's files cannot grow, when that can be seen: a file at the process's size limit, a full disk."""
    if path == ":memory:":
        return None
    files = [f"{path}{suffix}" for suffix in ("", "-wal", "-journal")]
    largest = max((os.path.getsize(f) for f in files if os.path.isfile(f)), default=0)
    limit = _size_limit()
    if limit is not None and largest + _ROOM >= limit:
        return f"its file has reached this process's file size limit, {limit} bytes (ulimit -f)"
    try:
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
    except OSError:
        return None
    return f"its disk has {free} bytes free" if free < _ROOM else None


def _size_limit() -> int | None:
    """This process's file size limit (``RLIMIT_FSIZE``) in bytes, if it has one."""
    if sys.platform == "win32":
        return None
    import resource

    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if limit == resource.RLIM_INFINITY else limit


def _foreign(path: str, text: str) -> FailedPreconditionError:
    return FailedPreconditionError(
        f"the SQLite file at {path!r} has tables named {TABLE!r} / {SESSIONS!r} that are not interlock's "
        f"layout ({text}); use a separate file for the store, or rename those tables"
    )


def check_layout(con: sqlite3.Connection, path: str) -> None:
    """Check that the store's tables have the columns this version reads (FAILED_PRECONDITION if not)."""
    try:
        con.execute(f"SELECT tenant, {COLUMNS}, leaf FROM {TABLE} LIMIT 0")
        con.execute(f"SELECT id, tenant, session_id FROM {SESSIONS} LIMIT 0")
    except sqlite3.OperationalError as exc:
        raise _foreign(path, str(exc)) from exc


def stopped(path: str, exc: BaseException) -> UnavailableError:
    """The error of every call to the SQLite store at ``path`` once its worker thread has died of ``exc``."""
    return UnavailableError(
        f"the SQLite store at {path!r} stopped serving: its worker thread failed ({type(exc).__name__}: {exc}); "
        "retrying will not help until the store is opened again: restart the process (or close the store and "
        "open a new one), and report this failure"
    )
