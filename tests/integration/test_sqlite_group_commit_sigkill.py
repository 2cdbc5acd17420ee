"""An acknowledged SQLite save survives a SIGKILL of its process (a child python process killed mid-batch).

The in-process group-commit tests are in ``unit/test_sqlite_group_commit.py``.
"""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import textwrap

from interlock.stores.sqlite import SQLiteStore

CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from interlock import Message
    from interlock.records._sessions import SessionState, Snapshot
    from interlock.stores.sqlite import SQLiteStore

    async def main(path):
        async with SQLiteStore(path) as store:
            acked = 0
            gate = asyncio.Semaphore(50)  # 50 in flight at a time

            async def save(i):
                async with gate:
                    await write(i)

            async def write(i):
                nonlocal acked
                sid = f"d{i}"
                state = SessionState(messages=[Message.user("x" * 200)])
                await store.save(sid, lambda _: Snapshot(snapshot_id=sid, session_id="s", state=state))
                print(sid, flush=True)
                acked += 1
                if acked == 120:  # saves are still in flight: die without closing anything
                    os.kill(os.getpid(), signal.SIGKILL)

            await asyncio.gather(*(save(i) for i in range(400)))

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_an_acknowledged_save_survives_sigkill(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "d.db"
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    acked = done.stdout.split()
    assert len(acked) >= 120
    async with SQLiteStore(path) as store:
        for sid in acked:
            assert await store.load(sid) is not None, sid
        assert len(await store.list()) < 400  # it did die with saves in flight
