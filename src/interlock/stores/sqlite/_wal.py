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

The header is read through one descriptor per file that the process keeps open while any of
its stores has a connection to that file (:class:`WalIndex`), never one opened and closed per
read: closing a descriptor of a file drops every lock the process holds on it (POSIX record
locks), SQLite's own included. SQLite keeps a shared lock on the ``-shm`` file for as long as a
connection is open, so that another process opening the database knows it is in use; without
it, that process would take itself for the first and reset the WAL index under this one.
"""

from __future__ import annotations

import os
import struct
import threading

_HEADER = struct.Struct("=14xHI76xI")  # szPage at 14, mxFrame at 16, nBackfill at 96
_FRAME_HEADER = 24

_shared: dict[tuple[int, int], list[int]] = {}
"""A ``-shm`` file's ``(device, inode)`` → ``[descriptor, stores attached]``: this process's descriptors of the
files read (by file, not path: two paths to one file share its descriptor, as they share SQLite's locks)."""
_shared_lock = threading.Lock()


class WalIndex:
    """One store's view of its file's WAL: how many bytes of frames wait, and the log file's size.

    :meth:`attach` once the store's connection is open (SQLite has made the ``-shm`` file), and
    :meth:`detach` once it is closed: the descriptor is shared by the process's stores of the
    same file, and closed when the last of them detaches (after their connections closed, so no
    lock of theirs is left to drop).
    """

    def __init__(self, wal_path: str) -> None:
        self.path = wal_path
        self._shm = wal_path[: -len("-wal")] + "-shm"
        self._fd: int | None = None
        self._file: tuple[int, int] | None = None

    def attach(self) -> None:
        """Share (or open) the process's descriptor of the ``-shm`` file; none if it cannot be opened."""
        if self._fd is not None:
            return
        with _shared_lock:
            # An entry is a file a connection has open: SQLite deletes the file only once no connection has it.
            try:
                found = os.stat(self._shm)
            except OSError:
                return  # pending_bytes falls back to the log's size
            key = (found.st_dev, found.st_ino)
            entry = _shared.get(key)
            if entry is None:
                try:
                    entry = _shared[key] = [os.open(self._shm, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)), 0]
                except OSError:
                    return
            entry[1] += 1
            self._fd, self._file = entry[0], key

    def detach(self) -> None:
        """Stop reading through the shared descriptor (after the store's connection closed)."""
        if self._fd is None or self._file is None:
            return
        with _shared_lock:
            entry = _shared.get(self._file)
            if entry is not None and entry[0] == self._fd:
                entry[1] -= 1
                if entry[1] == 0:
                    os.close(entry[0])
                    del _shared[self._file]
            self._fd = self._file = None

    def pending_bytes(self) -> int:
        """Bytes of the log's frames not yet copied into the database.

        When the header cannot be read, the log file's size stands in for them (what the worker
        measured before: a checkpoint too many at worst, never a log that grows unchecked).
        """
        fd = self._fd
        if fd is None:
            return self.file_bytes()
        try:
            raw = os.pread(fd, _HEADER.size, 0)
        except OSError:
            return self.file_bytes()
        if len(raw) < _HEADER.size:
            return self.file_bytes()
        page, last, copied = _HEADER.unpack(raw)
        page = 65536 if page == 1 else page
        return max(0, last - copied) * (page + _FRAME_HEADER)

    def file_bytes(self) -> int:
        """The log file's size (0 if it is missing)."""
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0
