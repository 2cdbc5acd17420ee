"""Which snapshots a prune may delete: one rule shared by every store."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from ..errors import InvalidArgumentError

PruneRow = tuple[str, str | None, datetime, str]
"""``(snapshot_id, parent_id, created_at, status)`` of one snapshot in the prune's scope."""


def prunable(rows: Iterable[PruneRow], *, keep_last: int | None, older_than: datetime | None) -> list[str]:
    """The ids a prune deletes among ``rows`` (one tenant, and one session when the prune names one).

    A snapshot is deleted only when all of these hold:

    * it is not ``pending`` (a detached turn may still be writing it);
    * with ``keep_last``: it is not among the last ``keep_last`` snapshots of any leaf's
      parent chain (the leaf itself, its parent, ... ``keep_last`` rows in all), so every
      leaf, and with it the session's latest snapshot, is kept;
    * with ``older_than``: it was created before ``older_than``.

    At least one of ``keep_last`` (≥ 1) and ``older_than`` is required, so a prune never
    deletes everything by accident.
    """
    if keep_last is None and older_than is None:
        raise InvalidArgumentError("prune needs keep_last, older_than or both")
    if keep_last is not None and keep_last < 1:
        raise InvalidArgumentError(f"prune's keep_last must be at least 1, got {keep_last}")
    if older_than is not None and older_than.tzinfo is None:
        older_than = older_than.replace(tzinfo=UTC)
    table = {sid: (parent, created, status) for sid, parent, created, status in rows}
    protected: set[str] = set()
    if keep_last is not None:
        parents = {parent for parent, _, _ in table.values() if parent}
        for leaf in table.keys() - parents:
            node: str | None = leaf
            for _ in range(keep_last):
                if node is None or node not in table:
                    break
                protected.add(node)
                node = table[node][0]
    return [
        sid
        for sid, (_, created, status) in table.items()
        if sid not in protected and status != "pending" and (older_than is None or created < older_than)
    ]
