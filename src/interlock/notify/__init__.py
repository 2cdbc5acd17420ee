"""Notifications: signed webhook delivery and the deadline sweeper.

The names below are loaded on first use, so importing one submodule does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._deadlines import Expiry as Expiry
    from ._deadlines import ExpiryResult as ExpiryResult
    from ._deadlines import run_deadlines as run_deadlines
    from ._deadlines import sweep as sweep
    from ._webhooks import Endpoint as Endpoint
    from ._webhooks import Webhooks as Webhooks
    from ._webhooks import endpoints_from_specs as endpoints_from_specs
    from ._webhooks import sign as sign
    from ._webhooks import verify as verify

_WHERE = {
    "Endpoint": "._webhooks",
    "Expiry": "._deadlines",
    "ExpiryResult": "._deadlines",
    "Webhooks": "._webhooks",
    "endpoints_from_specs": "._webhooks",
    "run_deadlines": "._deadlines",
    "sign": "._webhooks",
    "sweep": "._deadlines",
    "verify": "._webhooks",
}

__all__ = [
    "Endpoint",
    "Expiry",
    "ExpiryResult",
    "Webhooks",
    "endpoints_from_specs",
    "run_deadlines",
    "sign",
    "sweep",
    "verify",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
