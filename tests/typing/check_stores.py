# pyright: strict
"""Type-level tests of the store seam, checked by pyright (strict), not run by pytest.

Every store in the box is each capability Protocol and the whole ``SessionStore``; a
capability is not another. Each line marked ``# pyright: ignore[...]`` must be an error:
with ``reportUnnecessaryTypeIgnoreComment`` on, pyright starting to accept it fails the check.
"""

from __future__ import annotations

from interlock.stores import InterruptIndex, JournalStore, OutboxStore, SessionStore, SnapshotStore, StoreAdmin
from interlock.stores.memory import InMemoryStore
from interlock.stores.postgres import PostgresStore
from interlock.stores.sqlite import SQLiteStore
from interlock.testing._stores import StoreFactory, StoreFactoryOf


def every_capability(store: InMemoryStore | SQLiteStore | PostgresStore) -> None:
    whole: SessionStore = store
    core: SnapshotStore = store
    journal: JournalStore = store
    outbox: OutboxStore = store
    index: InterruptIndex = store
    admin: StoreAdmin = store
    del whole, core, journal, outbox, index, admin


def capabilities_are_apart(journal: JournalStore, admin: StoreAdmin, core: SnapshotStore) -> None:
    a: SnapshotStore = journal  # pyright: ignore[reportAssignmentType]
    b: OutboxStore = admin  # pyright: ignore[reportAssignmentType]
    c: SessionStore = core  # pyright: ignore[reportAssignmentType]
    del a, b, c


def a_whole_factory_serves_each_capabilitys_checks(make: StoreFactory, core: StoreFactoryOf[SnapshotStore]) -> None:
    narrow: StoreFactoryOf[SnapshotStore] = make
    whole: StoreFactory = core  # pyright: ignore[reportAssignmentType]
    del narrow, whole
