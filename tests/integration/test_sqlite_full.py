"""A full disk is RESOURCE_EXHAUSTED, saying so and what to do, whichever way SQLite reports it; the store recovers.

Two real ways for a write to find no room: the process's file size limit (``RLIMIT_FSIZE``:
``write()`` fails with ``EFBIG``, SQLite says ``SQLITE_IOERR_WRITE``), in a child process
so the limit binds nothing else; and the database's page limit (``SQLITE_FULL``, as a disk
with no space left gives).
"""

from __future__ import annotations

import json
import pathlib
import sqlite3
import subprocess
import sys
import textwrap

from interlock import Message
from interlock.errors import ResourceExhaustedError, UnavailableError
from interlock.records._sessions import SessionState, Snapshot
from interlock.stores.sqlite import SQLiteStore

LIMIT = 1 << 20

CHILD = textwrap.dedent(
    """
    import asyncio, json, os, resource, signal, sys
    from interlock import Message
    from interlock.errors import InterlockError
    from interlock.records._sessions import SessionState, Snapshot
    from interlock.stores.sqlite import SQLiteStore

    def big(i):
        state = SessionState(messages=[Message.user(os.urandom(3000).hex())])
        return Snapshot(snapshot_id=f"s{i}", session_id="s", state=state)

    async def main(path, limit):
        async with SQLiteStore(path) as store:
            await store.setup()
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead of killing the process
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
            saved = 0
            try:
                for i in range(1000):
                    await store.save(f"s{i}", lambda _, s=big(i): s)
                    saved += 1
            except InterlockError as exc:
                failure = {"status": exc.status, "message": exc.message}
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            await store.save("safter", lambda _: big("after"))  # room again: the same store writes
            loaded = all([await store.load(f"s{i}") is not None for i in range(saved)])
            after = await store.load("safter") is not None
            print(json.dumps({"saved": saved, "failure": failure, "loaded": loaded, "after": after}))

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


def test_a_file_at_the_size_limit_is_resource_exhausted(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "limited.db"), str(LIMIT)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["saved"] > 0 and report["loaded"] and report["after"], report
    failure = report["failure"]
    assert failure["status"] == "RESOURCE_EXHAUSTED", failure
    assert (
        f"is full (disk I/O error; its file has reached this process's file size limit, {LIMIT} bytes"
        in (failure["message"])
    )
    assert failure["message"].endswith("free disk space (or raise the file size limit), then retry")


async def test_sqlite_full_is_resource_exhausted(tmp_path: pathlib.Path) -> None:
    async with SQLiteStore(tmp_path / "capped.db") as store:
        await store.setup()
        await store._call(lambda: store._db().execute("PRAGMA max_page_count = 60"))  # pyright: ignore[reportPrivateUsage]
        saved = 0
        try:
            for i in range(1000):
                state = SessionState(messages=[Message.user(f"{i} " + "x" * 3000)])
                await store.save(
                    f"s{i}", lambda _, i=i, state=state: Snapshot(snapshot_id=f"s{i}", session_id="s", state=state)
                )
                saved += 1
        except ResourceExhaustedError as exc:
            assert exc.status == "RESOURCE_EXHAUSTED"
            assert exc.message.startswith(f"the SQLite store at {store.path!r} is full (database or disk is full; ")
            assert exc.message.endswith("free disk space (or raise the file size limit), then retry")
        assert 0 < saved < 1000
        await store._call(lambda: store._db().execute("PRAGMA max_page_count = 100000"))  # pyright: ignore[reportPrivateUsage]
        await store.save("after", lambda _: Snapshot(snapshot_id="after", session_id="s"))
        assert len(await store.list()) == saved + 1


def test_other_io_errors_are_unavailable_not_busy(tmp_path: pathlib.Path) -> None:
    """A read or write error the disk's room does not explain: worth retrying, and not called busy."""
    from interlock.stores.sqlite._errors import sqlite_error

    for code in (sqlite3.SQLITE_IOERR_READ, sqlite3.SQLITE_IOERR_WRITE):
        exc = sqlite3.OperationalError("disk I/O error")
        exc.sqlite_errorcode = code
        error = sqlite_error(exc, str(tmp_path / "x.db"))  # an empty directory on a disk with room
        assert isinstance(error, UnavailableError)
        assert "could not read or write its file (disk I/O error); retrying may help" in error.message
