"""What the stores keep: plain records and the pure changes of them (nothing here imports the engine).

The names below are loaded on first use, so importing one submodule does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._interrupt_index import InterruptQuery as InterruptQuery
    from ._interrupt_index import OpenInterrupt as OpenInterrupt
    from ._interrupt_index import entries_of as entries_of
    from ._journal import Expecting as Expecting
    from ._journal import JournalEntry as JournalEntry
    from ._journal import JournalStatus as JournalStatus
    from ._journal import call_key as call_key
    from ._journal import digest as digest
    from ._journal import superseded as superseded
    from ._outbox import DEADLINE as DEADLINE
    from ._outbox import WEBHOOK as WEBHOOK
    from ._outbox import OutboxEvent as OutboxEvent
    from ._outbox import OutboxStatus as OutboxStatus
    from ._outbox import Retention as Retention
    from ._outbox import backoff as backoff
    from ._outbox import is_claimable as is_claimable
    from ._outbox import is_prunable as is_prunable
    from ._outbox import is_retryable as is_retryable
    from ._outbox import leased as leased
    from ._outbox import new_event as new_event
    from ._outbox import retried as retried
    from ._outbox import retries as retries
    from ._sessions import Artifact as Artifact
    from ._sessions import ChunkSink as ChunkSink
    from ._sessions import CustomPatch as CustomPatch
    from ._sessions import ErrorInfo as ErrorInfo
    from ._sessions import Session as Session
    from ._sessions import SessionState as SessionState
    from ._sessions import Snapshot as Snapshot
    from ._sessions import SnapshotStatus as SnapshotStatus
    from ._sessions import check_state as check_state
    from ._sessions import new_id as new_id
    from ._sessions import trusted_state as trusted_state
    from ._sessions import utcnow as utcnow

_WHERE = {
    "DEADLINE": "._outbox",
    "WEBHOOK": "._outbox",
    "Artifact": "._sessions",
    "ChunkSink": "._sessions",
    "CustomPatch": "._sessions",
    "ErrorInfo": "._sessions",
    "Expecting": "._journal",
    "InterruptQuery": "._interrupt_index",
    "JournalEntry": "._journal",
    "JournalStatus": "._journal",
    "OpenInterrupt": "._interrupt_index",
    "OutboxEvent": "._outbox",
    "OutboxStatus": "._outbox",
    "Retention": "._outbox",
    "Session": "._sessions",
    "SessionState": "._sessions",
    "Snapshot": "._sessions",
    "SnapshotStatus": "._sessions",
    "backoff": "._outbox",
    "call_key": "._journal",
    "check_state": "._sessions",
    "digest": "._journal",
    "entries_of": "._interrupt_index",
    "is_claimable": "._outbox",
    "is_prunable": "._outbox",
    "is_retryable": "._outbox",
    "leased": "._outbox",
    "new_event": "._outbox",
    "new_id": "._sessions",
    "retried": "._outbox",
    "retries": "._outbox",
    "superseded": "._journal",
    "trusted_state": "._sessions",
    "utcnow": "._sessions",
}

__all__ = [
    "DEADLINE",
    "WEBHOOK",
    "Artifact",
    "ChunkSink",
    "CustomPatch",
    "ErrorInfo",
    "Expecting",
    "InterruptQuery",
    "JournalEntry",
    "JournalStatus",
    "OpenInterrupt",
    "OutboxEvent",
    "OutboxStatus",
    "Retention",
    "Session",
    "SessionState",
    "Snapshot",
    "SnapshotStatus",
    "backoff",
    "call_key",
    "check_state",
    "digest",
    "entries_of",
    "is_claimable",
    "is_prunable",
    "is_retryable",
    "leased",
    "new_event",
    "new_id",
    "retried",
    "retries",
    "superseded",
    "trusted_state",
    "utcnow",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
