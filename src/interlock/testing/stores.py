"""The store conformance suite.

:func:`check_store` runs :data:`STORE_CHECKS`, the contract every
:class:`~interlock.stores.SessionStore` must meet (snapshots, atomic multi-row saves,
tenants, watch, deletes, the effect journal, the outbox, the leaves and the index of open
interrupts), against a store of your own.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, TypeAlias

from ..stores import SessionStore
from ._index_checks import INDEX_CHECKS
from ._journal_checks import JOURNAL_CHECKS
from ._outbox_checks import OUTBOX_CHECKS
from ._session_checks import (
    check_bookkeeping_keeps_state,
    check_delete_keeps_history,
    check_latest_branching,
    check_latest_linear,
    check_list_filters,
    check_long_chain,
    check_rewrite_keeps_others,
    check_tenant_isolation,
    check_tenant_rule,
    check_watch_ends,
    check_watch_sees_abort,
)
from ._snapshot_checks import (
    check_concurrent_saves,
    check_ready,
    check_round_trip,
    check_save_all_is_atomic,
    check_session_id_is_fixed,
    check_terminal_status_absorbs,
    check_updater_error_propagates,
    check_updater_none_writes_nothing,
    check_versions,
)

__all__ = ["STORE_CHECKS", "StoreCheck", "StoreFactory", "check_store", "store_factory"]


class StoreFactory(Protocol):
    """Opens a fresh, empty store for one check and closes it afterwards.

    ``async with make_store() as store: ...``; ``reject_branching=True`` asks for a store
    whose :meth:`~interlock.stores.SessionStore.latest` rejects branching sessions.
    """

    def __call__(self, *, reject_branching: bool = False) -> AbstractAsyncContextManager[SessionStore]: ...


StoreCheck: TypeAlias = Callable[[StoreFactory], Awaitable[None]]
"""One conformance check: an async function of a :class:`StoreFactory` that raises ``AssertionError`` on failure."""


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
    also parametrise a test over :data:`STORE_CHECKS` to see every failure separately.
    """
    for check in STORE_CHECKS if checks is None else checks:
        try:
            await check(make_store)
        except AssertionError as exc:
            raise AssertionError(f"{getattr(check, '__name__', check)}: {exc}") from exc


STORE_CHECKS: list[StoreCheck] = [
    check_round_trip,
    check_updater_none_writes_nothing,
    check_updater_error_propagates,
    check_versions,
    check_session_id_is_fixed,
    check_terminal_status_absorbs,
    check_latest_linear,
    check_latest_branching,
    check_tenant_isolation,
    check_watch_sees_abort,
    check_watch_ends,
    check_list_filters,
    check_delete_keeps_history,
    check_rewrite_keeps_others,
    check_bookkeeping_keeps_state,
    check_long_chain,
    check_concurrent_saves,
    check_save_all_is_atomic,
    check_tenant_rule,
    check_ready,
    *JOURNAL_CHECKS,
    *OUTBOX_CHECKS,
    *INDEX_CHECKS,
]
"""Every store conformance check, in order (each opens its own fresh stores)."""
