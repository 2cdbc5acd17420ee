"""The command line's numeric and duration options, read by :mod:`interlock._durations` like the inbox's.

Each reader is an ``argparse`` ``type=``: a refused value is a usage error (exit code 2)
saying what the option accepts, never a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import timedelta

from .. import _durations as durations
from ..errors import InvalidArgumentError

_WHAT = "the value"


def parse_duration(text: str) -> timedelta:
    """A duration: ``90s``, ``10m``, ``2h``, ``30d``, ``1w``, ``1h30m`` or whole seconds."""
    try:
        return durations.parse_duration(text, _WHAT)
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def whole(low: int, high: int) -> Callable[[str], int]:
    """A reader of whole numbers from ``low`` to ``high``."""

    def read(text: str) -> int:
        try:
            return durations.parse_whole(text, _WHAT, low=low, high=high)
        except InvalidArgumentError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    return read


def seconds(text: str) -> float:
    """A positive number of seconds (``1.5``), or a duration (``2m``)."""
    value = parse_duration(text).total_seconds()
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{_WHAT} must be more than 0 seconds, not {text!r}")
    return value
