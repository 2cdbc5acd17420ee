"""The SQLite store's message histories: base chains read in one recursive query.

The cache and the assembly rules are :mod:`interlock.stores._sql.history`'s (shared with the
PostgreSQL store): saving or loading a child of a recently seen snapshot neither re-reads
nor re-parses the chain. A miss loads the whole base chain in one recursive query. Its ids
are as stored (:data:`~._codec.DbId`): :func:`~._codec.id_out` decodes them.
"""

from __future__ import annotations

import sqlite3

from .._sql.history import ChainCache
from .._sql.row_codec import Messages, Row
from ._codec import id_in, id_out, link_of
from ._schema import MAX_CHAIN, SELECT_CHAIN


class MessageChains(ChainCache):
    """Rows' full message histories, on the worker thread (each method runs in the caller's transaction)."""

    decode_id = staticmethod(id_out)

    def messages_of(self, con: sqlite3.Connection, tenant: str, row: Row) -> Messages | None:
        """A row's full message history (``None``: the row has no state)."""
        if row.tail is None:
            return None
        found = self.without_chain(tenant, row)
        return found if found is not None else self.chain(con, tenant, row.snapshot_id, row.mrev)

    def chain(self, con: sqlite3.Connection, tenant: str, snapshot_id: str, mrev: int | None) -> Messages:
        """Assemble a row's messages from its base chain, read in one query (``mrev``: expected, if known)."""
        links = [
            link_of(r)
            for r in con.execute(
                SELECT_CHAIN, {"tenant": tenant, "snapshot_id": id_in(snapshot_id), "max_depth": MAX_CHAIN}
            )
        ]
        return self.assemble(tenant, snapshot_id, mrev, links)
