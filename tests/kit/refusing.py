"""A stand-in SQLite connection whose statements find a lock taken a number of times, then run."""

from __future__ import annotations

import sqlite3


class Refusing:
    """Each ``execute`` fails with SQLite error ``code`` ("database is locked") ``refusals`` times, then runs."""

    def __init__(self, refusals: int, code: int = sqlite3.SQLITE_BUSY) -> None:
        self.refusals, self.code, self.calls = refusals, code, 0

    def execute(self, sql: str) -> None:
        self.calls += 1
        if self.refusals:
            self.refusals -= 1
            exc = sqlite3.OperationalError("database is locked")
            exc.sqlite_errorcode = self.code
            raise exc
