"""Schema versions: the one rule both SQL stores apply when they open their tables.

Each store keeps its layout's version in a table :data:`SCHEMA_TABLE` (one row per
component: ``interlock`` for the store's own tables; a worker backend may add its own).
On open, a store compares the stored version with the one its code writes:

* no tables at all: the store creates the current layout (a new file or database);
* older: the store refuses with ``FAILED_PRECONDITION`` naming ``interlock db upgrade``,
  unless it was opened with ``upgrade=True`` (what that command does), then it applies
  the forward migrations in order, in the transaction that checked the version;
* newer: refused, since this code cannot know what a later layout means.
"""

from __future__ import annotations

from ...errors import FailedPreconditionError

SCHEMA_TABLE = "interlock_schema"
COMPONENT = "interlock"


def plan_upgrade(found: int, current: int, *, where: str, url: str, upgrade: bool) -> range:
    """The versions to migrate to (``found + 1 .. current``), or raise if the store cannot be opened as is.

    Args:
        found: the stored version.
        current: the version this code writes.
        where: the store, for messages ("the SQLite store at 'x.db'").
        url: the URL that names the store in the command to run.
        upgrade: whether migrations may run now.
    """
    if found > current:
        raise FailedPreconditionError(
            f"{where} has schema version {found}, written by a newer interlock; this version reads up to "
            f"{current}: upgrade interlock"
        )
    if found < current and not upgrade:
        raise FailedPreconditionError(
            f"{where} has schema version {found}, older than this interlock's {current}; "
            f"run `interlock db upgrade --store {url}` to migrate it (back it up first)"
        )
    return range(found + 1, current + 1)
