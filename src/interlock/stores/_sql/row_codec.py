"""What both SQL stores' codecs share: column values ↔ Python values, and rows ↔ snapshots.

Timestamps (integer microseconds since 1970, or after a row's creation), JSON columns and
the errors that say a row is corrupt, a snapshot row as decoded (:class:`Row`: ids and
statuses as strings), a base chain's rows (:class:`Link`), a row's message tails, and the
snapshot a row holds (:func:`decode`) or the values it is written as (:func:`bookkeeping`).

Used by the SQLite store (:mod:`interlock.stores.sqlite._codec` adds its compact ids and
statuses, and reads its rows) and by the PostgreSQL store (:mod:`interlock.stores.postgres._rows`,
whose columns are plain text), and by what they share (:mod:`interlock.stores._sql.history`,
:mod:`interlock.stores._sql.index_rows`). It imports neither store's modules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, cast

from ..._json_object import is_array, json_encoder
from ..._stored_messages import stored_messages
from ..._wire import artifact_from_json, artifact_to_json, error_from_json, error_to_json
from ...errors import DataLossError, InvalidArgumentError
from ...messages import Message
from ...records._sessions import Artifact, SessionState, Snapshot, trusted_state

Messages = tuple[Message, ...]


# timestamps -----------------------------------------------------------------------------------

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_us(value: datetime) -> int:
    """Integer microseconds since the Unix epoch (a naive datetime is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - EPOCH) // _MICROSECOND


def after(value: datetime | None, created_us: int) -> int | None:
    """A timestamp as stored next to ``created_us``: microseconds after it."""
    return None if value is None else to_us(value) - created_us


def from_us(value: object, snapshot_id: str | None = None) -> datetime:
    """The datetime a stored timestamp stands for; :class:`DataLossError` if it is not one."""
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        try:
            return EPOCH + timedelta(0, 0, value)  # positional: a keyword costs timedelta half again
        except OverflowError:
            pass
    what = f"a timestamp in the SQLite store is {value!r}, not microseconds since 1970 (a damaged file?)"
    raise corrupt(snapshot_id, what) if snapshot_id else DataLossError(what)


def from_after(value: int | None, created_us: int) -> datetime | None:
    return None if value is None else from_us(created_us + value)


# rows -----------------------------------------------------------------------------------------


class Row(NamedTuple):
    """A snapshot row, decoded: ids as strings, timestamps as absolute microseconds."""

    snapshot_id: str
    session_id: str
    session: int
    parent_id: str | None
    base_id: str | None
    keep: int
    tail: str | None
    mrev: int
    base_mrev: int | None
    state_session: str | None
    custom: str | None
    artifacts: str | None
    created_us: int
    updated_us: int | None
    heartbeat_us: int | None
    status: str
    finish_reason: str | None
    error: str | None
    version: int
    claimed_by: str | None
    claimed_us: int | None
    metadata: str | None

    @property
    def base(self) -> str | None:
        """The row whose messages form this row's prefix, or ``None`` for a full checkpoint."""
        return None if self.keep == 0 else (self.base_id or self.parent_id)


class Link(NamedTuple):
    """One row of a base chain, its ids as the store's driver returns them.

    PostgreSQL's are text; SQLite's may be a UUID's 16 bytes. The chain cache decodes them
    only when needed (:meth:`~._history.ChainCache.decode_id`): most never are.
    """

    snapshot_id: str | bytes
    base: str | bytes | None
    keep: int
    tail: str | None
    mrev: int
    base_mrev: int | None


# JSON and errors ------------------------------------------------------------------------------


dumps = json_encoder(ensure_ascii=False, separators=(",", ":"))
"""Compact JSON, non-ASCII kept (the rows' JSON columns)."""


def corrupt(snapshot_id: str, what: str, exc: BaseException | None = None) -> DataLossError:
    detail = f": {exc}" if exc is not None else ""
    return DataLossError(f"snapshot {snapshot_id!r} is corrupt in the store ({what}{detail})")


def loads(snapshot_id: str, column: str, text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError) as exc:
        raise corrupt(snapshot_id, f"column {column!r} is not valid JSON", exc) from exc


def parse_tail(snapshot_id: str, text: str) -> list[Message]:
    data = loads(snapshot_id, "tail", text)
    try:
        return stored_messages(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise corrupt(snapshot_id, "column 'tail' does not hold messages", exc) from exc


def parse_tails(
    snapshot_ids: Sequence[str | bytes], texts: Sequence[str], decode_id: Callable[[str | bytes], str]
) -> list[list[Message]]:
    """Several rows' tails at once, as one JSON document (the array of their arrays) when that parses.

    One ``json.loads`` of the lot costs less than one per row, and so does building their
    messages in one go. The tails must come back as exactly one array per row; anything else
    (a damaged row) falls back to :func:`parse_tail`, one by one, which says which row is corrupt
    (``snapshot_ids`` as stored, ``decode_id`` making ids of them: only then are they decoded).
    """
    try:
        data: Any = json.loads(f"[{','.join(texts)}]")
        tails = cast(list[list[Any]], data)
        if is_array(data) and len(tails) == len(texts) and all(is_array(t) for t in tails):
            built = stored_messages([m for t in tails for m in t])
            out: list[list[Message]] = []
            start = 0
            for tail in tails:
                end = start + len(tail)
                out.append(built[start:end])
                start = end
            return out
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    return [parse_tail(decode_id(sid), text) for sid, text in zip(snapshot_ids, texts, strict=True)]


def same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Element-wise equal, cheaply.

    Tuple comparison (in C) checks identity before ``==``, and the runtime shares
    (immutable) messages between snapshots, so this is mostly a pointer scan.
    """
    return len(a) == len(b) and tuple(a) == tuple(b)


# rows ↔ snapshots -----------------------------------------------------------------------------


def decode(row: Row, messages: Messages | None) -> tuple[Snapshot, list[Artifact]]:
    """The snapshot a row holds, and its artifacts as parsed (to notice unchanged artifacts on save)."""
    sid = row.snapshot_id
    artifacts: list[Artifact] = []
    state: SessionState | None = None
    try:
        if messages is not None:
            if row.artifacts is not None:
                data = loads(sid, "artifacts", row.artifacts)
                if not is_array(data):
                    raise corrupt(sid, "column 'artifacts' is not a JSON list")
                artifacts = [artifact_from_json(a) for a in data]
            state_session: Any = row.session_id
            if row.state_session is not None:
                state_session = loads(sid, "state_session", row.state_session)
                if state_session is not None and not isinstance(state_session, str):
                    raise corrupt(sid, "column 'state_session' is not a JSON string or null")
            custom = None if row.custom is None else loads(sid, "custom", row.custom)
            # parsed here (messages, artifacts, JSON): checked already, so not again per message
            state = trusted_state(
                session_id=state_session, messages=list(messages), custom=custom, artifacts=list(artifacts)
            )
        error = None if row.error is None else error_from_json(loads(sid, "error", row.error))
        metadata: Any = None if row.metadata is None else loads(sid, "metadata", row.metadata)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise corrupt(sid, "a JSON column has the wrong shape", exc) from exc
    if metadata is not None and not isinstance(metadata, dict):
        raise corrupt(sid, "column 'metadata' is not a JSON object")
    snapshot = Snapshot(
        snapshot_id=sid,
        session_id=row.session_id,
        parent_id=row.parent_id,
        created_at=from_us(row.created_us, sid),
        updated_at=None if row.updated_us is None else from_us(row.updated_us, sid),
        heartbeat_at=None if row.heartbeat_us is None else from_us(row.heartbeat_us, sid),
        status=row.status,
        finish_reason=row.finish_reason,
        error=error,
        state=state,
        version=row.version,
        claimed_by=row.claimed_by,
        claim_expires_at=None if row.claimed_us is None else from_us(row.claimed_us, sid),
        metadata=cast(dict[str, Any] | None, metadata),
    )
    return snapshot, artifacts


def plain(value: str | None) -> str | None:
    """Ids and statuses stored as they are (the PostgreSQL store's columns are typed ``text``)."""
    return value


def bookkeeping(
    new: Snapshot,
    row: Row | None,
    old_artifacts: list[Artifact],
    *,
    ident: Callable[[str | None], Any],
    word: Callable[[str | None], Any],
    old: Snapshot | None = None,
) -> tuple[Any, ...]:
    """The stored values of everything but a snapshot's messages, from ``parent_id`` to ``metadata``.

    In the order of both stores' ``UPDATE_BOOKKEEPING`` (after ``base_id``);
    ``row`` and ``old_artifacts`` (what the row held) let unchanged artifacts keep their JSON,
    and ``old`` (the snapshot decoded from ``row``) unchanged custom state, error and metadata:
    a value ``new`` shares with ``old`` (an updater's copy keeps what it does not change; updaters
    are pure, they never change what they were given) is the row's text, not encoded again.
    ``ident`` and ``word`` encode ids and statuses: the SQLite store passes its compact forms
    (:func:`~._codec.id_or_none`, :func:`~._codec.word_or_none`), the
    PostgreSQL store :func:`plain`.
    """
    sid = new.snapshot_id
    state = new.state
    kept = old if row is not None else None
    kept_state = None if kept is None else kept.state
    custom: str | None = None
    artifacts: str | None = None
    if state is not None:
        if state.custom is not None:
            if kept_state is not None and state.custom is kept_state.custom and row is not None and row.custom:
                custom = row.custom
            else:
                try:
                    custom = dumps(state.custom)
                except (TypeError, ValueError) as exc:
                    what = f"snapshot {sid!r}: custom state is not JSON-serialisable"
                    raise InvalidArgumentError(f"{what}: {exc}") from exc
        if state.artifacts:
            if row is not None and row.artifacts is not None and same(state.artifacts, old_artifacts):
                artifacts = row.artifacts
            else:
                artifacts = dumps([artifact_to_json(a) for a in state.artifacts])
    created = to_us(new.created_at)
    error = new.error
    metadata = new.metadata
    return (
        ident(new.parent_id),
        None if state is None or state.session_id == new.session_id else dumps(state.session_id),
        custom,
        artifacts,
        created,
        after(new.updated_at, created),
        after(new.heartbeat_at, created),
        word(new.status),
        word(new.finish_reason),
        _text(error, None if kept is None else kept.error, row and row.error, error_to_json),
        new.version,
        ident(new.claimed_by),
        after(new.claim_expires_at, created),
        _text(metadata, None if kept is None else kept.metadata, row and row.metadata, _same_value),
    )


def _text(value: Any, was: Any, stored: str | None, to_json: Callable[[Any], Any]) -> str | None:
    """A JSON column's text: ``None`` for ``None``, the ``stored`` text of ``was`` if ``value`` is it, else encoded."""
    if value is None:
        return None
    if value is was and stored is not None:
        return stored
    return dumps(to_json(value))


def _same_value(value: Any) -> Any:
    return value
