"""Numbers and durations as people type them, read in one place by the inbox's HTTP routes and the CLI.

:func:`parse_whole` reads a bounded whole number; :func:`parse_duration` reads ``90s``, ``10m``,
``2h``, ``30d``, ``1w``, a sum such as ``1h30m``, or a bare number of seconds, at most
:data:`MAX_DURATION`. Both accept ASCII digits only (never ``²`` or ``٣``), bound the text's
length before converting it, and refuse anything else with INVALID_ARGUMENT naming the
parameter and what it accepts: no input overflows, and none is an internal error.
"""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import InvalidArgumentError

MAX_DURATION = timedelta(days=36500)
"""The longest duration read: 100 years (any date that far back still exists)."""
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_NUMBER = r"[0-9]{1,12}(?:\.[0-9]{1,9})?"
_DURATION = re.compile(rf"(?:{_NUMBER}|(?:{_NUMBER}[smhdw])+)")
_PART = re.compile(rf"({_NUMBER})([smhdw])")
_WHOLE = re.compile(r"[0-9]{1,20}")
_LONGEST = 64
"""The most characters of a duration read (and of a refused value quoted back)."""


def _shown(text: str) -> str:
    return repr(text if len(text) <= _LONGEST else text[:_LONGEST] + "...")


def parse_whole(text: str, name: str, *, low: int, high: int) -> int:
    """``text`` as a whole number from ``low`` to ``high`` (ASCII digits); INVALID_ARGUMENT otherwise."""
    if _WHOLE.fullmatch(text) is None or not low <= int(text) <= high:
        raise InvalidArgumentError(
            f"{name} must be a whole number from {low} to {high} (digits 0-9), not {_shown(text)}"
        )
    return int(text)


def parse_duration(text: str, name: str = "the duration") -> timedelta:
    """``90s``, ``10m``, ``2h``, ``30d``, ``1w``, ``1h30m`` or seconds (``90``), at most 100 years.

    INVALID_ARGUMENT, naming ``name`` and what is accepted, for anything else.
    """
    given = text.strip().lower()
    if len(given) <= _LONGEST and _DURATION.fullmatch(given):
        parts = _PART.findall(given) or [(given, "s")]
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
        if seconds <= MAX_DURATION.total_seconds():
            return timedelta(seconds=seconds)
    raise InvalidArgumentError(
        f"{name} must be a duration like 90s, 10m, 2h, 30d, 1w or 1h30m (or whole seconds), "
        f"at most {MAX_DURATION.days}d, not {_shown(text)}"
    )
