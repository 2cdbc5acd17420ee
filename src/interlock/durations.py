"""Durations as people type them: ``90s``, ``10m``, ``2h``, ``30d``, ``1w`` or a sum such as ``1h30m``.

The command line's ``--older-than`` and the inbox API's ``older_than`` read them with the one
:func:`parse_duration`.
"""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import InvalidArgumentError

__all__ = ["parse_duration"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``10m``, ``2h``, ``30d``, ``1w`` or a sum such as ``1h30m``; INVALID_ARGUMENT otherwise."""
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", text.strip().lower())
    if not parts or "".join(n + u for n, u in parts) != text.strip().lower():
        raise InvalidArgumentError(f"expected a duration like 90s, 10m, 2h, 30d or 1h30m, got {text!r}")
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))
