"""SQLite failures as interlock errors: transient ones UNAVAILABLE, permanent ones what to fix.

Only a busy or locked database (or an I/O hiccup) is worth retrying; a read-only file, a
missing directory, a full disk, a damaged file or a table that is not ours stays that way
until someone changes it, and the message says what to change.
"""

from __future__ import annotations

import sqlite3

from ..errors import (
    DataLossError,
    FailedPreconditionError,
    InterlockError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnavailableError,
)
from ._sqlite_schema import COLUMNS, SESSIONS, TABLE

_TRANSIENT = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PROTOCOL})
_LAYOUT_WORDS = ("no such column", "no such table", "has no column")


def _primary(exc: sqlite3.Error) -> int | None:
    """The primary result code of ``exc`` (its extended code's low byte), if SQLite gave one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another connection holds a lock (``SQLITE_BUSY`` or ``SQLITE_LOCKED``)."""
    return _primary(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def sqlite_error(exc: sqlite3.Error, path: str) -> InterlockError:
    """The interlock error for a failure of the SQLite store at ``path``."""
    primary = _primary(exc)
    where = f"the SQLite store at {path!r}"
    text = str(exc)
    if primary in _TRANSIENT or (primary is None and "locked" in text):
        return UnavailableError(f"{where} is busy ({text}); retrying may help")
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return PermissionDeniedError(
            f"{where} cannot be written ({text}); make the file and its directory writable by this process, "
            "or use another path"
        )
    if primary == sqlite3.SQLITE_CANTOPEN:
        return FailedPreconditionError(
            f"{where} cannot be opened ({text}); check that its directory exists and is writable, or use another path"
        )
    if primary == sqlite3.SQLITE_FULL:
        return ResourceExhaustedError(f"{where} is full ({text}); free disk space")
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or not isinstance(exc, sqlite3.OperationalError):
        return DataLossError(f"{where} is not a usable database ({text}); restore it from a backup or use another path")
    if any(word in text for word in _LAYOUT_WORDS):
        return _foreign(path, text)
    return FailedPreconditionError(f"{where} failed ({text})")


def _foreign(path: str, text: str) -> FailedPreconditionError:
    return FailedPreconditionError(
        f"the SQLite file at {path!r} has tables named {TABLE!r} / {SESSIONS!r} that are not interlock's "
        f"layout ({text}); use a separate file for the store, or rename those tables"
    )


def check_layout(con: sqlite3.Connection, path: str) -> None:
    """Check that the store's tables have the columns this version reads (FAILED_PRECONDITION if not)."""
    try:
        con.execute(f"SELECT tenant, {COLUMNS} FROM {TABLE} LIMIT 0")
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
