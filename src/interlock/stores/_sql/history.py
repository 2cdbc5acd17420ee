"""Message histories stored as deltas: the rules both SQL stores share.

A row keeps ``keep`` messages of its base and adds a ``tail`` (see
:mod:`interlock.stores.sqlite._schema`). This module is the part that does not touch a
database: the LRU cache of assembled histories keyed by each row's content revision
(``mrev``, so an entry is never stale, whichever process wrote the row), assembling a
history from a base chain already read, and how much of a parent's history a new row
shares. The SQLite and PostgreSQL stores read the chain their own way and hand it here
(a chain's ids as their driver returns them: :meth:`ChainCache.decode_id` makes ids of them).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import NamedTuple, cast

from ...messages import Message
from .row_codec import Link, Messages, Row, corrupt, parse_tail, parse_tails


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


ROW_COST = 256
"""What reading one more row of a base chain costs (about 2.5 µs: the query's step, decoding the row, assembling),
in bytes of stored history loaded (parsed, and built as messages) in the same time."""
CHAIN_LIMIT = 1.75
"""A new row is a delta only while loading it cold costs at most this many times loading its history as one
document (plus :data:`CHAIN_SLACK`); past that it is written as a full checkpoint.

So a cold load reads one checkpoint and the deltas since, their rows costing at most three quarters of the
history's own load (plus the slack). Storage stays linear: a checkpoint of ``n`` bytes comes after at least
``0.75 * n / ROW_COST`` rows, so each row adds its own tail plus at most ``ROW_COST / (CHAIN_LIMIT - 1)``
(some 340 bytes) of checkpoint, amortized, and turns of more than that many bytes never need one: a 200-turn
session of short turns stays within twice its JSON on disk (``tests/integration/test_sqlite_store.py``)."""
CHAIN_SLACK = 16 * ROW_COST


class Cached(NamedTuple):
    """A cached history: the row's content revision, its messages, their size as stored JSON, and the row's load cost.

    ``chain`` is what loading the row cold costs: the JSON bytes of every tail in its base
    chain, plus :data:`ROW_COST` per row.
    """

    mrev: int
    messages: Messages
    size: int
    chain: int


def kept_size(base: Cached, keep: int) -> int:
    """The stored size of the first ``keep`` messages of ``base`` (in proportion, when not all of them)."""
    n = len(base.messages)
    return base.size if keep >= n else base.size * keep // n


class ChainCache:
    """Assembled histories, cached by ``(tenant, snapshot_id)`` and checked against ``mrev``.

    The cache holds at most ``cache_bytes`` of histories, counted as the size of their
    stored JSON. A history shares its messages with its base's (both are tuples of the same
    objects), but each entry counts them all: the bound errs on the small side.
    """

    def __init__(self, cache_bytes: int) -> None:
        self.cache_bytes = cache_bytes
        self.cache: OrderedDict[tuple[str, str], Cached] = OrderedDict()
        self.cached_bytes = 0
        self.revisions: Counter[int] = Counter()
        """The ``mrev`` of each entry: a chain's rows are looked up only if theirs is here (most never are)."""

    @staticmethod
    def decode_id(value: str | bytes) -> str:
        """The id a chain's stored id stands for: the text itself (PostgreSQL's ids are ``text``).

        The SQLite store's chains override it with their own decoding (its ids may be a UUID's
        16 bytes). Called only for an error's message or a possible cache hit.
        """
        return cast(str, value)

    def entry(self, tenant: str, snapshot_id: str, mrev: int | None) -> Cached | None:
        key = (tenant, snapshot_id)
        hit = self.cache.get(key)
        if hit is None or hit.mrev != mrev:
            return None
        self.cache.move_to_end(key)
        return hit

    def cached(self, tenant: str, snapshot_id: str, mrev: int | None) -> Messages | None:
        hit = self.entry(tenant, snapshot_id, mrev)
        return None if hit is None else hit.messages

    def remember(self, tenant: str, snapshot_id: str, mrev: int, messages: Messages, size: int, chain: int) -> None:
        key = (tenant, snapshot_id)
        self.drop(key)
        self.cache[key] = Cached(mrev, messages, size, chain)
        self.cached_bytes += size
        self.revisions[mrev] += 1
        while self.cached_bytes > self.cache_bytes and len(self.cache) > 1:
            self.drop(next(iter(self.cache)))

    def drop(self, key: tuple[str, str]) -> None:
        old = self.cache.pop(key, None)
        if old is not None:
            self.cached_bytes -= old.size
            self.revisions[old.mrev] -= 1
            if not self.revisions[old.mrev]:
                del self.revisions[old.mrev]

    def remember_written(
        self, tenant: str, snapshot_id: str, mrev: int, messages: Messages, tail: str, base: tuple[str, int, int] | None
    ) -> None:
        """Cache a history just written: ``tail`` after ``keep`` messages of ``base``, if any (``(id, mrev, keep)``)."""
        found = None if base is None else self.entry(tenant, base[0], base[1])
        size, chain = len(tail), len(tail) + ROW_COST
        if found is not None and base is not None:
            size, chain = size + kept_size(found, base[2]), chain + found.chain
        self.remember(tenant, snapshot_id, mrev, messages, size, chain)

    def too_deep(self, tenant: str, base_id: str, base_mrev: int, keep: int) -> bool:
        """Whether a row keeping ``keep`` messages of the (cached) base should be a full checkpoint instead.

        So that loading any row cold reads at most one checkpoint and a bounded chain of
        deltas since: at most :data:`CHAIN_LIMIT` times the cost of its history as one
        document. Appended turns get there after a number of rows in proportion to the
        history's size; rows that add nothing, or keep only part of their base (a compacted
        history), sooner.
        """
        base = self.entry(tenant, base_id, base_mrev)
        return base is not None and base.chain + ROW_COST > CHAIN_LIMIT * kept_size(base, keep) + CHAIN_SLACK

    def forget(self, tenant: str, snapshot_ids: Sequence[str]) -> None:
        for sid in snapshot_ids:
            self.drop((tenant, sid))

    def clear(self) -> None:
        self.cache.clear()
        self.cached_bytes = 0
        self.revisions.clear()

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
            size, chain = len(tail), len(tail) + ROW_COST
        else:
            base = self.entry(tenant, row.base, row.base_mrev)
            if base is None:
                return None
            if row.keep > len(base.messages):
                raise corrupt(row.snapshot_id, f"keeps {row.keep} messages of a base that has {len(base.messages)}")
            messages = base.messages[: row.keep] + tuple(parse_tail(row.snapshot_id, tail))
            size, chain = kept_size(base, row.keep) + len(tail), base.chain + len(tail) + ROW_COST
        self.remember(tenant, row.snapshot_id, row.mrev, messages, size, chain)
        return messages

    def assemble(self, tenant: str, snapshot_id: str, mrev: int | None, links: Sequence[Link]) -> Messages:
        """A row's history from its base chain, as read (the row first); ``mrev``: the revision expected, if known."""
        if not links:
            raise corrupt(snapshot_id, "its row vanished while its history was read")
        if mrev is not None and links[0].mrev != mrev:
            raise corrupt(snapshot_id, "its message revision changed while its history was read")
        pending: list[Link] = []
        start = Cached(0, (), 0, 0)
        revisions = self.revisions
        decode_id = self.decode_id
        for i, link in enumerate(links):
            if link.tail is None:
                what = f"its history passes through {decode_id(link.snapshot_id)!r}, which has no state"
                raise corrupt(snapshot_id, what)
            if i > 0 and links[i - 1].base_mrev != link.mrev:
                what = f"its base {decode_id(link.snapshot_id)!r} changed under it"
                raise corrupt(decode_id(links[i - 1].snapshot_id), what)
            hit = None if link.mrev not in revisions else self.entry(tenant, decode_id(link.snapshot_id), link.mrev)
            if hit is not None:
                start = hit
                break
            pending.append(link)
            if link.base is None:
                break
        else:
            last = links[-1]
            base = None if last.base is None else decode_id(last.base)
            what = f"its base snapshot {base!r} is missing (or the chain is cyclic)"
            raise corrupt(decode_id(last.snapshot_id), what)
        messages = list(start.messages)
        size, chain = start.size, start.chain
        pending.reverse()
        texts = [cast(str, link.tail) for link in pending]
        tails = parse_tails([link.snapshot_id for link in pending], texts, decode_id)
        for link, tail, parsed in zip(pending, texts, tails, strict=True):
            if link.keep > len(messages):
                what = f"keeps {link.keep} messages of a base that has {len(messages)}"
                raise corrupt(decode_id(link.snapshot_id), what)
            if link.keep < len(messages):
                size = size * link.keep // len(messages)
                del messages[link.keep :]
            messages.extend(parsed)
            size += len(tail)
            chain += len(tail) + ROW_COST
        result = tuple(messages)
        self.remember(tenant, snapshot_id, links[0].mrev, result, size, chain)
        return result
