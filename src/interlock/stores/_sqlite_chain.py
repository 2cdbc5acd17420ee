"""The SQLite store's message histories: assembled from base chains, kept in an LRU cache.

The cache maps ``(tenant, snapshot_id) → (mrev, messages)``; because ``mrev`` names the
content, a cached entry is never stale, even when another process writes the file:
saving or loading a child of a recently seen snapshot neither re-reads nor re-parses the
chain. A miss loads the whole base chain in one recursive query.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from typing import cast

from ._sqlite_codec import Link, Messages, Row, corrupt, id_in, link_of, parse_tail
from ._sqlite_schema import MAX_CHAIN, SELECT_CHAIN


class MessageChains:
    """Rows' full message histories, on the worker thread (each method runs in the caller's transaction)."""

    def __init__(self, cache_size: int) -> None:
        self.cache_size = cache_size
        self.cache: OrderedDict[tuple[str, str], tuple[int, Messages]] = OrderedDict()

    # cache ------------------------------------------------------------------------------------

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

    # histories --------------------------------------------------------------------------------

    def messages_of(self, con: sqlite3.Connection, tenant: str, row: Row) -> Messages | None:
        """A row's full message history (``None``: the row has no state)."""
        if row.tail is None:
            return None
        hit = self.cached(tenant, row.snapshot_id, row.mrev)
        if hit is not None:
            return hit
        if row.base is None:
            if row.keep:
                raise corrupt(row.snapshot_id, f"keeps {row.keep} messages but has no parent to keep them from")
            messages = tuple(parse_tail(row.snapshot_id, row.tail))
        else:
            base = self.cached(tenant, row.base, row.base_mrev)
            if base is None:
                return self.chain(con, tenant, row.snapshot_id, row.mrev)
            if row.keep > len(base):
                raise corrupt(row.snapshot_id, f"keeps {row.keep} messages of a base that has {len(base)}")
            messages = base[: row.keep] + tuple(parse_tail(row.snapshot_id, row.tail))
        self.remember(tenant, row.snapshot_id, row.mrev, messages)
        return messages

    def chain(self, con: sqlite3.Connection, tenant: str, snapshot_id: str, mrev: int | None) -> Messages:
        """Assemble a row's messages from its base chain, read in one query (``mrev``: expected, if known)."""
        links = [link_of(r) for r in con.execute(SELECT_CHAIN, (tenant, id_in(snapshot_id), MAX_CHAIN))]
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
