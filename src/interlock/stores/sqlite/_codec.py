"""The SQLite store's own encodings: compact ids and statuses, and its rows read.

Ids that are canonical UUIDs are stored as their 16 bytes (:func:`id_in` / :func:`id_out`),
common statuses and finish reasons as small integers (:data:`WORDS`), and a
:data:`~._schema.SELECT_ROW` or :data:`~._schema.SELECT_CHAIN` result is read
as the shared codec's row (:func:`row_of`, :func:`link_of`). What the PostgreSQL store shares
(timestamps, JSON, rows ↔ snapshots) is :mod:`interlock.stores._sql.row_codec`'s.
Used by the SQLite store's modules only; see :mod:`interlock.stores.sqlite._schema` for what
each column holds.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ...errors import DataLossError
from .._sql.row_codec import Link, Row, corrupt
from ._schema import SESSIONS

# ids ------------------------------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

DbId = str | bytes
"""An id as stored: TEXT, or the 16 bytes of a canonical UUID string."""

_IDS = 4096
"""Ids remembered each way: a turn converts its snapshot's, its parent's and its session's ids several
times (each statement names them), a conversion costs ~0.4-0.6 µs, a remembered one ~0.07 µs."""


@functools.lru_cache(maxsize=_IDS)
def id_in(value: str) -> DbId:
    """The stored form of an id: a canonical lowercase UUID string's 16 bytes, else the string itself."""
    if len(value) == 36 and _UUID.fullmatch(value):
        return bytes.fromhex(value.replace("-", ""))
    return value


def id_or_none(value: str | None) -> DbId | None:
    return None if value is None else id_in(value)


@functools.lru_cache(maxsize=_IDS)
def id_out(value: DbId) -> str:
    """The id a stored value stands for (the inverse of :func:`id_in`)."""
    if isinstance(value, bytes):
        if len(value) != 16:
            raise DataLossError(f"an id in the SQLite store is a {len(value)}-byte blob, not a UUID's 16 bytes")
        h = value.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return value


def id_out_or_none(value: DbId | None) -> str | None:
    return None if value is None else id_out(value)


# statuses and finish reasons -----------------------------------------------------------------

WORDS = (
    "completed",
    "stop",
    "pending",
    "interrupted",
    "failed",
    "aborted",
    "detached",
    "length",
    "blocked",
    "other",
    "unknown",
)
"""Common statuses and finish reasons, stored as their index here. Part of the file format: append only."""
_CODES = {word: code for code, word in enumerate(WORDS)}


def word_in(value: str) -> int | str:
    """The stored form of a status or finish reason: its code in :data:`WORDS`, else the string itself."""
    return _CODES.get(value, value)


def word_or_none(value: str | None) -> int | str | None:
    return None if value is None else _CODES.get(value, value)


def word_out(value: object) -> str:
    """The status or finish reason a stored value stands for (the inverse of :func:`word_in`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and 0 <= value < len(WORDS):
        return WORDS[value]
    raise DataLossError(f"a status or finish reason in the SQLite store has the unknown code {value!r}")


def word_out_or_none(value: object) -> str | None:
    return None if value is None else word_out(value)


# rows -----------------------------------------------------------------------------------------


def row_of(found: tuple[Any, ...]) -> Row:
    """Decode a :data:`~._schema.SELECT_ROW` result."""
    (sid, session_id, session, parent, base, keep, tail, mrev, base_mrev, state_session, custom, artifacts) = found[:12]
    (created, updated, heartbeat, status, finish, error, version, claimed_by, claimed, metadata) = found[12:]
    snapshot_id = id_out(sid)
    if session_id is None:
        raise corrupt(snapshot_id, f"its session {session!r} is missing from {SESSIONS!r}")
    if not (
        type(keep) is type(mrev) is type(created) is type(version) is int
        and {type(base_mrev), type(updated), type(heartbeat), type(claimed)} <= _INTEGER_OR_NONE
        and {type(tail), type(state_session), type(custom), type(artifacts), type(error), type(metadata)}
        <= _TEXT_OR_NONE
    ):  # the usual row passes this one test; else the column at fault is named
        _check_types(snapshot_id, found)
    return Row(
        snapshot_id,
        id_out(session_id),
        session,
        id_out_or_none(parent),
        id_out_or_none(base),
        keep,
        tail,
        mrev,
        base_mrev,
        state_session,
        custom,
        artifacts,
        created,
        None if updated is None else created + updated,
        None if heartbeat is None else created + heartbeat,
        word_out(status),
        word_out_or_none(finish),
        error,
        version,
        id_out_or_none(claimed_by),
        None if claimed is None else created + claimed,
        metadata,
    )


_INTEGER_OR_NONE = frozenset((int, type(None)))
_TEXT_OR_NONE = frozenset((str, type(None)))


def _check_types(snapshot_id: str, found: tuple[Any, ...]) -> None:
    """Raise DATA_LOSS naming a column of a :data:`~._schema.SELECT_ROW` result that holds the wrong type."""
    (_, _, _, _, _, keep, tail, mrev, base_mrev, state_session, custom, artifacts) = found[:12]
    (created, updated, heartbeat, _, _, error, version, _, claimed, metadata) = found[12:]
    integers = {"keep": keep, "mrev": mrev, "created_us": created, "version": version}
    optional = {"base_mrev": base_mrev, "updated_us": updated, "heartbeat_us": heartbeat, "claimed_us": claimed}
    for column, value in (integers | {k: v for k, v in optional.items() if v is not None}).items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise corrupt(snapshot_id, f"column {column!r} holds {value!r}, not an integer")
    for column, value in (("tail", tail), ("custom", custom), ("artifacts", artifacts), ("error", error)):
        if value is not None and not isinstance(value, str):
            raise corrupt(snapshot_id, f"column {column!r} holds {type(value).__name__}, not JSON text")
    if metadata is not None and not isinstance(metadata, str):
        raise corrupt(snapshot_id, f"column 'metadata' holds {type(metadata).__name__}, not JSON text")
    if state_session is not None and not isinstance(state_session, str):
        raise corrupt(snapshot_id, f"column 'state_session' holds {type(state_session).__name__}, not JSON text")


def link_of(found: tuple[Any, ...]) -> Link:
    """A :data:`~._schema.SELECT_CHAIN` result (its ids are decoded only if needed: most never are)."""
    return Link._make(found)
