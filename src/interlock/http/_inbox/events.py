r"""Live updates: a tenant's pending interrupts, watched, as server-sent events.

:func:`changes` lists the tenant's pending interrupts every ``interval`` seconds (one
:meth:`~interlock.inbox.Inbox.pending` call: the same rule as every listing) and yields
the first listing and every change: interrupts that appeared, and those that stopped
waiting (answered, or otherwise gone). A stream ends after ``lifetime`` seconds (the
browser's ``EventSource`` reconnects by itself) or when the client goes away.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ...inbox._inbox import Inbox, PendingInterrupt
from .service import Filters

WATCHED = 500
"""The most pending interrupts a live listing follows (the oldest first)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """One step of the watch: the listing now, what appeared and which snapshots stopped waiting."""

    items: list[PendingInterrupt]
    created: list[PendingInterrupt]
    resolved: list[str]


async def changes(
    inbox: Inbox, tenant: str | None, *, interval: float, lifetime: float, filters: Filters | None = None
) -> AsyncIterator[Change]:
    """The first listing (of what ``filters`` let through), then each change, until ``lifetime`` seconds passed."""
    f = filters or Filters()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + lifetime
    seen: dict[str, PendingInterrupt] | None = None
    while loop.time() < deadline:
        items = await inbox.pending(
            tenant=tenant,
            agent=f.agent,
            tool=f.tool,
            session_id=f.session_id,
            older_than=f.older_than,
            newer_than=f.newer_than,
            in_doubt=f.in_doubt,
            newest_first=f.newest_first,
            limit=WATCHED,
        )
        now = {i.snapshot_id: i for i in items}
        if seen is None or now.keys() != seen.keys():
            before = seen or {}
            created = [i for i in items if i.snapshot_id not in before]
            resolved = [sid for sid in before if sid not in now]
            yield Change(items=items, created=created if seen is not None else [], resolved=resolved)
            seen = now
        await asyncio.sleep(interval)


def sse(event: str, data: str) -> bytes:
    r"""One server-sent event: ``event: <name>`` and one ``data:`` line per line of ``data``."""
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    return f"event: {event}\n{lines}\n".encode()
