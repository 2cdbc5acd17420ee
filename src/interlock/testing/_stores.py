"""The store conformance suite, one part per capability of the store seam.

Each capability Protocol of :mod:`interlock.stores` has its checks, and a function that runs
them against a factory of stores with that capability (and the core's, which every check writes with):

* :class:`~interlock.stores.SnapshotStore`, the core: :data:`SNAPSHOT_CHECKS`, :func:`check_snapshot_store`;
* :class:`~interlock.stores.StoreAdmin`: :data:`ADMIN_CHECKS`, :func:`check_admin_store`;
* :class:`~interlock.stores.JournalStore`: :data:`JOURNAL_CHECKS`, :func:`check_journal_store`;
* :class:`~interlock.stores.OutboxStore`: :data:`OUTBOX_CHECKS`, :func:`check_outbox_store`;
* :class:`~interlock.stores.InterruptIndex`: :data:`INDEX_CHECKS`, :func:`check_index_store`.

:func:`check_store` runs them all (:data:`STORE_CHECKS`) against a whole
:class:`~interlock.stores.SessionStore`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from ..stores import SessionStore, SnapshotStore
from ._admin_checks import ADMIN_CHECKS
from ._checking import run_checks
from ._index_checks import INDEX_CHECKS
from ._journal_checks import JOURNAL_CHECKS
from ._kinds import AdminStore, IndexedStore, JournaledStore, OutboxedStore, StoreCheck, StoreFactory, StoreFactoryOf
from ._outbox_checks import OUTBOX_CHECKS
from ._snapshot_checks import SNAPSHOT_CHECKS


async def check_snapshot_store(make_store: StoreFactoryOf[SnapshotStore]) -> None:
    """Run :data:`SNAPSHOT_CHECKS` (the core) on fresh stores from ``make_store``; raises naming the failing check."""
    await run_checks(make_store, SNAPSHOT_CHECKS)


async def check_admin_store(make_store: StoreFactoryOf[AdminStore]) -> None:
    """Run :data:`ADMIN_CHECKS` on fresh stores from ``make_store``; raises naming the failing check."""
    await run_checks(make_store, ADMIN_CHECKS)


async def check_journal_store(make_store: StoreFactoryOf[JournaledStore]) -> None:
    """Run :data:`JOURNAL_CHECKS` on fresh stores from ``make_store``; raises naming the failing check."""
    await run_checks(make_store, JOURNAL_CHECKS)


async def check_outbox_store(make_store: StoreFactoryOf[OutboxedStore]) -> None:
    """Run :data:`OUTBOX_CHECKS` on fresh stores from ``make_store``; raises naming the failing check."""
    await run_checks(make_store, OUTBOX_CHECKS)


async def check_index_store(make_store: StoreFactoryOf[IndexedStore]) -> None:
    """Run :data:`INDEX_CHECKS` on fresh stores from ``make_store``; raises naming the failing check."""
    await run_checks(make_store, INDEX_CHECKS)


def store_factory(make: Callable[..., SessionStore]) -> StoreFactory:
    """A :class:`StoreFactory` from a store constructor (called with the options as keywords).

    After each check the store's ``close()`` (sync or async) is called if it has one.
    ``store_factory(InMemoryStore)`` is the simplest example.
    """

    @asynccontextmanager
    async def open_store(*, reject_branching: bool = False) -> AsyncGenerator[SessionStore, None]:
        store = make(reject_branching=reject_branching)
        try:
            yield store
        finally:
            close: Any = getattr(store, "close", None)
            if callable(close):
                result = close()
                if inspect.isawaitable(result):
                    await result

    return open_store


async def check_store(make_store: StoreFactory, *, checks: Iterable[StoreCheck] | None = None) -> None:
    """Run every check of :data:`STORE_CHECKS` (or ``checks``) against fresh stores from ``make_store``.

    Raises ``AssertionError`` naming the first check that fails. Third-party stores can
    also parametrise a test over :data:`STORE_CHECKS` to see every failure separately, or
    run one capability's checks (:func:`check_snapshot_store`, ...).
    """
    await run_checks(make_store, STORE_CHECKS if checks is None else checks)


STORE_CHECKS: list[StoreCheck] = [*SNAPSHOT_CHECKS, *ADMIN_CHECKS, *JOURNAL_CHECKS, *OUTBOX_CHECKS, *INDEX_CHECKS]
"""Every store conformance check, capability by capability (each opens its own fresh stores)."""
