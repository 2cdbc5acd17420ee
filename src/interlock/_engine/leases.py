"""One refresh timer per event loop for every claim held on it (:class:`interlock._engine.commit.ClaimHold`).

A held claim is refreshed ``ttl / 3`` seconds after it was taken (or last refreshed). Rather than
a timer of its own per claim, armed when the claim is taken and cancelled when its turn commits
a few milliseconds later, each hold is an entry of its loop's :class:`LeaseClock`: a dictionary
of due times served by one lazily armed timer. Taking a claim adds an entry (arming a timer only
when none is armed as early), ending it removes the entry and leaves the timer be: when the
timer fires it refreshes the holds that are due and arms itself again for the next one, or, with
none left, stays unarmed until a claim is taken.

The clock keeps no reference to its loop or to its timers: a loop that is closed and dropped
takes its pending timers, and with them its clock, along.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Protocol


class Refreshed(Protocol):
    """A held lease: :meth:`due` starts its refresh."""

    def due(self) -> None: ...


class LeaseClock:
    """The due times of the leases held on one event loop, and the one timer that serves them."""

    __slots__ = ("_at", "_due", "__weakref__")

    def __init__(self) -> None:
        self._due: dict[Refreshed, float] = {}
        self._at = math.inf
        """When the earliest timer still armed fires (``inf``: none is armed)."""

    def add(self, hold: Refreshed, delay: float, loop: asyncio.AbstractEventLoop) -> None:
        """Call ``hold.due()`` ``delay`` seconds from now (unless removed first)."""
        when = loop.time() + delay
        self._due[hold] = when
        if when < self._at:
            self._arm(when, loop)

    def remove(self, hold: Refreshed) -> None:
        """Forget ``hold`` (idempotent). The timer stays armed; it finds nothing due for it."""
        self._due.pop(hold, None)

    def __len__(self) -> int:
        return len(self._due)

    def _arm(self, when: float, loop: asyncio.AbstractEventLoop) -> None:
        self._at = when
        loop.call_at(when, self._fire, when)

    def _fire(self, at: float) -> None:
        """A timer armed for ``at``: every hold due by then refreshes; the next timer is armed."""
        if at >= self._at:  # the earliest armed timer fired: none is armed before the next below
            self._at = math.inf
        due = [hold for hold, when in self._due.items() if when <= at]
        for hold in due:
            del self._due[hold]
        for hold in due:
            hold.due()
        if self._due:
            nearest = min(self._due.values())
            if nearest < self._at:
                self._arm(nearest, asyncio.get_running_loop())


_clocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LeaseClock] = weakref.WeakKeyDictionary()
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], LeaseClock] | None = None
_kept: dict[asyncio.AbstractEventLoop, LeaseClock] = {}


def clock_of(loop: asyncio.AbstractEventLoop) -> LeaseClock:
    """``loop``'s lease clock (made on first use); the last one found is kept at hand."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    try:
        clock = _clocks.get(loop)
        if clock is None:
            clock = _clocks[loop] = LeaseClock()
        _last = (weakref.ref(loop), clock)
    except TypeError:  # a loop class that takes no weak reference: its clock is kept for good
        clock = _kept.get(loop) or _kept.setdefault(loop, LeaseClock())
    return clock
