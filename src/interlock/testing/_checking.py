"""What the store conformance checks share: how they run and the helpers they assert with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from ..messages import Message
from ..records._sessions import SessionState, Snapshot
from ..stores import SnapshotStore

if TYPE_CHECKING:
    from ._kinds import StoreFactoryOf

T0 = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

S = TypeVar("S", bound=SnapshotStore)


async def run_checks(
    make_store: StoreFactoryOf[S], checks: Iterable[Callable[[StoreFactoryOf[S]], Awaitable[None]]]
) -> None:
    """Run ``checks`` in order against fresh stores from ``make_store``.

    Raises ``AssertionError`` naming the first check that fails.
    """
    for check in checks:
        try:
            await check(make_store)
        except AssertionError as exc:
            raise AssertionError(f"{getattr(check, '__name__', check)}: {exc}") from exc


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def equal(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


async def raises(kind: type[BaseException], what: str, awaitable: Awaitable[Any]) -> BaseException:
    try:
        await awaitable
    except kind as exc:
        return exc
    raise AssertionError(f"{what}: expected {kind.__name__}, nothing was raised")


def at_seconds(seconds: float) -> datetime:
    """A fixed moment plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def snap(
    snapshot_id: str,
    session_id: str = "s1",
    parent_id: str | None = None,
    *,
    messages: Sequence[Message] = (),
    custom: Any = None,
    at: float = 0,
    status: str = "completed",
    finish_reason: str | None = "stop",
    metadata: dict[str, Any] | None = None,
    stateless: bool = False,
) -> Snapshot:
    state = None if stateless else SessionState(session_id=session_id, messages=list(messages), custom=custom)
    return Snapshot(
        snapshot_id=snapshot_id,
        session_id=session_id,
        parent_id=parent_id,
        created_at=at_seconds(at),
        status=status,
        finish_reason=finish_reason,
        state=state,
        metadata=metadata,
    )


async def put(store: SnapshotStore, snapshot: Snapshot, *, tenant: str | None = None) -> Snapshot:
    written = await store.save(snapshot.snapshot_id, lambda _: snapshot, tenant=tenant)
    expect(written is not None, f"save of {snapshot.snapshot_id!r} returned None")
    assert written is not None
    return written


async def must_load(store: SnapshotStore, snapshot_id: str, *, tenant: str | None = None) -> Snapshot:
    loaded = await store.load(snapshot_id, tenant=tenant)
    expect(loaded is not None, f"snapshot {snapshot_id!r} should load")
    assert loaded is not None
    return loaded


def messages_of(snapshot: Snapshot) -> list[Message]:
    expect(snapshot.state is not None, f"snapshot {snapshot.snapshot_id!r} should carry state")
    assert snapshot.state is not None
    return snapshot.state.messages


def turn(i: int) -> list[Message]:
    return [Message.user(f"question {i}"), Message.model(f"answer {i}")]


async def chain(store: SnapshotStore, n: int, *, session_id: str = "s1") -> list[list[Message]]:
    """Write ``n`` turns the way the runtime does (load the parent, append, save); returns each turn's history."""
    histories: list[list[Message]] = []
    parent: Snapshot | None = None
    for i in range(n):
        messages = (messages_of(parent) if parent is not None else []) + turn(i)
        parent_id = None if parent is None else parent.snapshot_id
        await put(store, snap(f"t{i}", session_id, parent_id, messages=messages, at=i))
        histories.append(list(messages))
        parent = await must_load(store, f"t{i}")
    return histories
