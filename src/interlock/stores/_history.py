"""Message histories stored as deltas: the rules both SQL stores share.

A row keeps ``keep`` messages of its base and adds a ``tail`` (see
:mod:`interlock.stores._sqlite_schema`). This module is the part that does not touch a
database: the LRU cache of assembled histories keyed by each row's content revision
(``mrev``, so an entry is never stale, whichever process wrote the row), assembling a
history from a base chain already read, and how much of a parent's history a new row
shares. The SQLite and PostgreSQL stores read the chain their own way and hand it here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import cast

from ..messages import Message
from ._sqlite_codec import Link, Messages, Row, corrupt, parse_tail


def common_prefix(new: Sequence[Message], base: Messages) -> int:
    """How many leading messages ``new`` shares with ``base`` (usually all of ``base``)."""
    n = len(base)
    if len(new) >= n and tuple(new[:n]) == base:
        return n
    n = min(n, len(new))
    k = 0
    while k < n and (new[k] is base[k] or new[k] == base[k]):
        k += 1
    return k


class ChainCache:
    """Assembled histories, cached by ``(tenant, snapshot_id)`` and checked against ``mrev``."""

    def __init__(self, cache_size: int) -> None:
        self.cache_size = cache_size
        self.cache: OrderedDict[tuple[str, str], tuple[int, Messages]] = OrderedDict()

    def cached(self, tenant: str, snapshot_id: str, mrev: int | None) -> Messages | None:
        key = (tenant, snapshot_id)
        hit = self.cache.get(key)
        if hit is None or hit[0] != mrev:
            return None
        self.cache.move_to_end(key)
        return hit[1]

    def remember(self, tenant: str, snapshot_id: str, mrev: int, messages: Messages) -> None:
        key = (tenant, snapshot_id)
        self.cache[key] = (mrev, messages)
        self.cache.move_to_end(key)
        while len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)

    def forget(self, tenant: str, snapshot_ids: Sequence[str]) -> None:
        for sid in snapshot_ids:
            self.cache.pop((tenant, sid), None)

    def without_chain(self, tenant: str, row: Row) -> Messages | None:
        """A row's history if no base chain must be read (a checkpoint, or a cached base); else ``None``.

        The caller has checked that the row has state (``row.tail`` is not ``None``).
        """
        hit = self.cached(tenant, row.snapshot_id, row.mrev)
        if hit is not None:
            return hit
        tail = str(row.tail)
        if row.base is None:
            if row.keep:
                raise corrupt(row.snapshot_id, f"keeps {row.keep} messages but has no parent to keep them from")
            messages = tuple(parse_tail(row.snapshot_id, tail))
        else:
            base = self.cached(tenant, row.base, row.base_mrev)
            if base is None:
                return None
            if row.keep > len(base):
                raise corrupt(row.snapshot_id, f"keeps {row.keep} messages of a base that has {len(base)}")
            messages = base[: row.keep] + tuple(parse_tail(row.snapshot_id, tail))
        self.remember(tenant, row.snapshot_id, row.mrev, messages)
        return messages

    def assemble(self, tenant: str, snapshot_id: str, mrev: int | None, links: Sequence[Link]) -> Messages:
        """A row's history from its base chain, as read (the row first); ``mrev``: the revision expected, if known."""
        if not links:
            raise corrupt(snapshot_id, "its row vanished while its history was read")
        if mrev is not None and links[0].mrev != mrev:
            raise corrupt(snapshot_id, "its message revision changed while its history was read")
        pending: list[Link] = []
        start: Messages = ()
        for i, link in enumerate(links):
            if link.tail is None:
                raise corrupt(snapshot_id, f"its history passes through {link.snapshot_id!r}, which has no state")
            if i > 0 and links[i - 1].base_mrev != link.mrev:
                raise corrupt(links[i - 1].snapshot_id, f"its base {link.snapshot_id!r} changed under it")
            hit = self.cached(tenant, link.snapshot_id, link.mrev)
            if hit is not None:
                start = hit
                break
            pending.append(link)
            if link.base is None:
                break
        else:
            last = links[-1]
            raise corrupt(last.snapshot_id, f"its base snapshot {last.base!r} is missing (or the chain is cyclic)")
        messages = list(start)
        for link in reversed(pending):
            if link.keep > len(messages):
                raise corrupt(link.snapshot_id, f"keeps {link.keep} messages of a base that has {len(messages)}")
            del messages[link.keep :]
            messages.extend(parse_tail(link.snapshot_id, cast(str, link.tail)))
        result = tuple(messages)
        self.remember(tenant, links[0].snapshot_id, links[0].mrev, result)
        return result
