"""Store conformance checks of :class:`~interlock.stores.StoreAdmin`: list, delete and prune snapshots.

Also the tenant rules of listing and deleting. Run by :func:`~.stores.check_admin_store` and
:data:`~.stores.STORE_CHECKS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError
from ..records._sessions import Snapshot
from ._checking import at_seconds as _at
from ._checking import chain as _chain
from ._checking import equal as _equal
from ._checking import expect as _expect
from ._checking import messages_of as _messages_of
from ._checking import must_load as _must_load
from ._checking import put as _put
from ._checking import raises as _raises
from ._checking import snap as _snap
from ._checking import turn as _turn

if TYPE_CHECKING:
    from ._kinds import AdminStore, StoreFactoryOf

    _Factory = StoreFactoryOf[AdminStore]


async def check_list_filters(make_store: _Factory) -> None:
    """Listing: newest first, filtered by session and finish reason, with the agent from metadata."""
    async with make_store() as store:
        await _put(store, _snap("a", "s1", messages=_turn(0), at=0, metadata={"agent": "bot"}))
        await _put(
            store,
            _snap("b", "s1", "a", messages=_turn(1), at=1, finish_reason="interrupted", metadata={"agent": "bot"}),
        )
        await _put(store, _snap("c", "s2", messages=_turn(2), at=2))
        infos = await store.list()
        _equal([i.snapshot_id for i in infos], ["c", "b", "a"], "list order")
        b = infos[1]
        _equal(
            (b.session_id, b.parent_id, b.created_at, b.status, b.finish_reason, b.agent),
            ("s1", "a", _at(1), "completed", "interrupted", "bot"),
            "snapshot info",
        )
        _equal(infos[0].agent, None, "agent of a row without metadata")
        _equal([i.snapshot_id for i in await store.list(session_id="s1")], ["b", "a"], "list of one session")
        _equal([i.snapshot_id for i in await store.list(finish_reason="interrupted")], ["b"], "list by finish reason")
        _equal(await store.list(session_id="s2", finish_reason="interrupted"), [], "list with both filters")


async def check_delete_keeps_history(make_store: _Factory) -> None:
    """Deleting snapshots (a middle ancestor, the root) leaves every other one loadable with its full history."""
    async with make_store() as store:
        histories = await _chain(store, 6)
        _equal(await store.delete(["t2"]), 1, "deleted count")
        _equal(await store.delete(["t2", "nope"]), 0, "deleted count of missing rows")
        _equal(await store.load("t2"), None, "a deleted snapshot")
        for i in (5, 3, 4, 1, 0):
            _equal(_messages_of(await _must_load(store, f"t{i}")), histories[i], f"history of t{i}")
        _equal(await store.delete(["t0", "t4"]), 2, "deleted count")
        for i in (5, 3, 1):
            _equal(_messages_of(await _must_load(store, f"t{i}")), histories[i], f"history of t{i}")
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "t5", "latest after deletes")


async def check_tenant_isolation(make_store: _Factory) -> None:
    """Another tenant's snapshots do not exist: load, latest, save, list, watch and delete see nothing."""
    async with make_store() as store:
        mine = await _put(store, _snap("x", "s1", messages=_turn(0), metadata={"agent": "a"}), tenant="acme")
        for other in (None, "globex"):
            _equal(await store.load("x", tenant=other), None, f"load from tenant {other!r}")
            _equal(await store.latest("s1", tenant=other), None, f"latest from tenant {other!r}")
            _equal(await store.list(tenant=other), [], f"list from tenant {other!r}")
            _equal([s async for s in store.watch("x", tenant=other)], [], f"watch from tenant {other!r}")
            _equal(await store.delete(["x"], tenant=other), 0, f"delete from tenant {other!r}")
        seen: list[Snapshot | None] = []
        theirs = _snap("x", "s-other", messages=_turn(9))

        def take(current: Snapshot | None) -> Snapshot | None:
            seen.append(current)
            return theirs

        await store.save("x", take, tenant="globex")
        _equal(seen, [None], "the updater in another tenant receives")
        _equal(await store.load("x", tenant="acme"), mine, "the first tenant's row after another tenant's save")
        _equal((await _must_load(store, "x", tenant="globex")).session_id, "s-other", "the second tenant's row")
        _equal([i.snapshot_id for i in await store.list(tenant="acme")], ["x"], "list of the first tenant")


async def check_tenant_rule(make_store: _Factory) -> None:
    """A tenant is None or a non-empty string: '' and non-strings are refused, not folded into None."""
    async with make_store() as store:
        await _put(store, _snap("x", messages=_turn(0)))
        for bad in ("", 0):
            await _raises(InvalidArgumentError, f"load with tenant {bad!r}", store.load("x", tenant=bad))  # type: ignore[arg-type]
            await _raises(InvalidArgumentError, f"list with tenant {bad!r}", store.list(tenant=bad))  # type: ignore[arg-type]


async def check_prune_keeps_recent_chains(make_store: _Factory) -> None:
    """keep_last keeps the last rows of each leaf's chain (so every leaf), pending rows stay, histories load."""
    async with make_store() as store:
        histories = await _chain(store, 5)
        await _put(store, _snap("b", parent_id="t1", messages=histories[1], at=10))
        pending = _snap("p", parent_id="t4", at=11, status="pending", finish_reason=None, stateless=True)
        await _put(store, pending)
        _equal(await store.prune(keep_last=2), 3, "rows pruned with keep_last=2")  # t0, t2, t3 (t1: b's parent)
        _equal({i.snapshot_id for i in await store.list()}, {"t1", "t4", "b", "p"}, "rows after the prune")
        _equal(_messages_of(await _must_load(store, "b")), histories[1], "history of b after a prune")
        for i in (1, 4):
            _equal(_messages_of(await _must_load(store, f"t{i}")), histories[i], f"history of t{i} after a prune")
        _equal(await store.prune(keep_last=1, session_id="other"), 0, "a prune of another session")
        _equal(await store.prune(keep_last=1, tenant="acme"), 0, "a prune of another tenant")
        leaf = await store.latest("s1")
        _equal(None if leaf is None else leaf.snapshot_id, "p", "latest after prunes")


async def check_prune_older_than(make_store: _Factory) -> None:
    """older_than deletes only rows created before it; a prune without a criterion is INVALID_ARGUMENT."""
    async with make_store() as store:
        await _chain(store, 4)
        await _raises(InvalidArgumentError, "a prune without keep_last or older_than", store.prune())
        await _raises(InvalidArgumentError, "a prune with keep_last=0", store.prune(keep_last=0))
        _equal(await store.prune(older_than=_at(2)), 2, "rows created before the cutoff")
        _equal([i.snapshot_id for i in await store.list()], ["t3", "t2"], "rows after the prune")
        _equal(await store.prune(older_than=_at(2) + timedelta(days=1), keep_last=1), 1, "both criteria")
        leaf = await store.latest("s1")
        _expect(leaf is not None and leaf.snapshot_id == "t3", f"the leaf stays, got {leaf}")


ADMIN_CHECKS: list[Callable[[_Factory], Awaitable[None]]] = [
    check_list_filters,
    check_delete_keeps_history,
    check_tenant_isolation,
    check_tenant_rule,
    check_prune_keeps_recent_chains,
    check_prune_older_than,
]
"""The admin checks, in order."""
