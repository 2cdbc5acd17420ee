"""The store conformance and prune tests of ``unit/test_stores.py``, on PostgreSQL (this tier's ``store_kind``)."""

from __future__ import annotations

from test_stores import (
    kind,
    make_store,
    test_prune_keep_last_keeps_each_leafs_recent_chain,
    test_prune_needs_a_criterion,
    test_prune_older_than_and_pending,
    test_store_conformance,
)

__all__ = [
    "kind",
    "make_store",
    "test_prune_keep_last_keeps_each_leafs_recent_chain",
    "test_prune_needs_a_criterion",
    "test_prune_older_than_and_pending",
    "test_store_conformance",
]
