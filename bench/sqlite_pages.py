"""The WAL pages one interrupt cycle writes on the SQLite store, transaction by transaction, by table.

Each page a transaction changes is one frame in the write-ahead log (written, then flushed by
the next fsync), so this is the cycle's I/O. The script runs ``bench/regress_workload.py``'s
interrupt cycle on a new file, closes the store (the log is copied into the file and removed),
opens it again and runs as many cycles more, then reads the log's frames: each commit's page
numbers, named by the table or index that owns the page (SQLite's ``dbstat`` table, when the
library has it; ``sqlite_schema`` is page 1, whose header holds the file's size). Each cycle
starts a new session (its session row is new).

    PYTHONPATH=src python bench/sqlite_pages.py
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the workload module beside this one

import regress_workload as workload

from interlock.stores.sqlite import SQLiteStore

_WAL_HEADER = 32
_FRAME_HEADER = 24


def commits(wal: bytes) -> list[list[int]]:
    """The page numbers of each committed transaction in a WAL file's bytes (see sqlite.org/walformat.html)."""
    (page_size,) = struct.unpack(">I", wal[8:12])
    found: list[list[int]] = []
    pages: list[int] = []
    at = _WAL_HEADER
    while at + _FRAME_HEADER + page_size <= len(wal):
        page, size_after_commit = struct.unpack(">II", wal[at : at + 8])
        pages.append(page)
        if size_after_commit:  # a commit's last frame
            found.append(pages)
            pages = []
        at += _FRAME_HEADER + page_size
    return found


def owners(path: str) -> dict[int, str]:
    """Page number → the table or index that owns it (empty when SQLite was built without ``dbstat``)."""
    with sqlite3.connect(path) as con:
        try:
            return {page: name for name, page in con.execute("SELECT name, pageno FROM dbstat")}
        except sqlite3.OperationalError:
            return {}


CYCLES = 20
"""Cycles measured (their log stays below the 4 MiB at which the store's worker would copy it)."""


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pages.db")
        async with SQLiteStore(path) as store:
            for _ in range(CYCLES):
                await workload.interrupt_cycle(store)
        async with SQLiteStore(path) as store:  # a new log: only the next cycles' frames
            for _ in range(CYCLES):
                await workload.interrupt_cycle(store)
            wal = Path(path + "-wal").read_bytes()
            names = owners(path)
    found = commits(wal)
    print(f"{CYCLES} interrupt cycles (each in a new session): WAL pages per cycle, by write transaction and table")
    per_cycle = len(found) // CYCLES
    if per_cycle * CYCLES == len(found):  # the cycles' transactions in step: the n-th of each together
        for n in range(per_cycle):
            tables = Counter(names.get(p, "?") for pages in found[n::per_cycle] for p in pages)
            total = sum(tables.values()) / CYCLES
            shares = ", ".join(f"{t} {c / CYCLES:.2g}" for t, c in sorted(tables.items()))
            print(f"transaction {n + 1}: {total:.2f}  ({shares})")
    print(f"total: {sum(len(p) for p in found) / CYCLES:.2f} pages in {len(found) / CYCLES:g} write transactions")


if __name__ == "__main__":
    asyncio.run(main())
