"""How much of the SQLite store's write-ahead log waits for a checkpoint, read without a query.

The worker (:mod:`._worker`) checkpoints the WAL itself. It copies the log's frames into the
database (``PASSIVE``) once their bytes pass a limit, and leaves the file at its size: the
next write starts the log again at its beginning, over blocks the file already has. Writing
over them costs far less than writing past the end of the file, as a truncated log's writes
do: each commit's flush then writes the file's new size and blocks too (measured here: about
40 µs more CPU per flushed commit). Only an idle worker truncates the file.

What a checkpoint would copy is read from the WAL-index header in the ``-shm`` file, whose
layout SQLite documents (https://www.sqlite.org/walformat.html): ``szPage`` (u16) at byte
14, ``mxFrame`` (u32, the last committed frame) at byte 16, and the checkpoint info's
``nBackfill`` (u32, the frames already copied) at byte 96, in native byte order.
"""

from __future__ import annotations

import os
import struct

_HEADER = struct.Struct("=14xHI76xI")  # szPage at 14, mxFrame at 16, nBackfill at 96
_FRAME_HEADER = 24


def pending_bytes(wal_path: str) -> int:
    """Bytes of the log's frames not yet copied into the database.

    When the header cannot be read, the log file's size stands in for them (what the worker
    measured before: a checkpoint too many at worst, never a log that grows unchecked).
    """
    try:
        fd = os.open(wal_path[: -len("-wal")] + "-shm", os.O_RDONLY)
    except OSError:
        return file_bytes(wal_path)
    try:
        raw = os.pread(fd, _HEADER.size, 0)
    except OSError:
        return file_bytes(wal_path)
    finally:
        os.close(fd)
    if len(raw) < _HEADER.size:
        return file_bytes(wal_path)
    page, last, copied = _HEADER.unpack(raw)
    page = 65536 if page == 1 else page
    return max(0, last - copied) * (page + _FRAME_HEADER)


def file_bytes(wal_path: str) -> int:
    """The log file's size (0 if it is missing)."""
    try:
        return os.path.getsize(wal_path)
    except OSError:
        return 0
