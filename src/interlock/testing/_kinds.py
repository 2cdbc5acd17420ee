"""The kinds of store the conformance checks take, and the factory that opens one.

A leaf: the checks and ``_stores.py`` both import it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeAlias, TypeVar

from ..stores import InterruptIndex, JournalStore, OutboxStore, SessionStore, SnapshotStore, StoreAdmin

S_co = TypeVar("S_co", bound=SnapshotStore, covariant=True)


class StoreFactoryOf(Protocol[S_co]):
    """Opens a fresh, empty store (an ``S_co``) for one check and closes it afterwards.

    ``async with make_store() as store: ...``; ``reject_branching=True`` asks for a store
    whose :meth:`~interlock.stores.SnapshotStore.latest` rejects branching sessions.
    """

    def __call__(self, *, reject_branching: bool = False) -> AbstractAsyncContextManager[S_co]: ...


StoreFactory: TypeAlias = StoreFactoryOf[SessionStore]
"""Opens a fresh, empty whole store for one check (a :class:`StoreFactoryOf` whole stores)."""

StoreCheck: TypeAlias = Callable[[StoreFactory], Awaitable[None]]
"""One conformance check: an async function of a :class:`StoreFactory` that raises ``AssertionError`` on failure."""


class AdminStore(SnapshotStore, StoreAdmin, Protocol):
    """What :data:`ADMIN_CHECKS` take: snapshots to list, delete and prune."""


class JournaledStore(SnapshotStore, JournalStore, StoreAdmin, Protocol):
    """What :data:`JOURNAL_CHECKS` take: snapshots (save_all writes entries), the journal, deletes (drop entries)."""


class OutboxedStore(SnapshotStore, OutboxStore, Protocol):
    """What :data:`OUTBOX_CHECKS` take: snapshots (save_all writes the events) and the outbox."""


class IndexedStore(SnapshotStore, InterruptIndex, StoreAdmin, Protocol):
    """What :data:`INDEX_CHECKS` take: snapshots, the index of open interrupts, and deletes (they change it)."""
