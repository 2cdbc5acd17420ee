"""The approval inbox: pending interrupts, audit rows and answers.

The names below are loaded on first use, so importing one submodule does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._answers import Answer as Answer
    from ._answers import Approve as Approve
    from ._answers import Edit as Edit
    from ._answers import Reject as Reject
    from ._answers import Respond as Respond
    from ._answers import Restart as Restart
    from ._answers import entry as entry
    from ._answers import match_all as match_all
    from ._answers import skip_note as skip_note
    from ._inbox import Inbox as Inbox
    from ._items import AuditAnswer as AuditAnswer
    from ._items import AuditEntry as AuditEntry
    from ._items import PendingInterrupt as PendingInterrupt
    from ._items import ResumableAgent as ResumableAgent
    from ._items import agent_of as agent_of
    from ._items import pending_item as pending_item

_WHERE = {
    "Answer": "._answers",
    "Approve": "._answers",
    "AuditAnswer": "._items",
    "AuditEntry": "._items",
    "Edit": "._answers",
    "Inbox": "._inbox",
    "PendingInterrupt": "._items",
    "Reject": "._answers",
    "Respond": "._answers",
    "Restart": "._answers",
    "ResumableAgent": "._items",
    "agent_of": "._items",
    "entry": "._answers",
    "match_all": "._answers",
    "pending_item": "._items",
    "skip_note": "._answers",
}

__all__ = [
    "Answer",
    "Approve",
    "AuditAnswer",
    "AuditEntry",
    "Edit",
    "Inbox",
    "PendingInterrupt",
    "Reject",
    "Respond",
    "Restart",
    "ResumableAgent",
    "agent_of",
    "entry",
    "match_all",
    "pending_item",
    "skip_note",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
