"""When both SQL stores answer ``ready()`` from a write they committed, without a check of their own."""

from __future__ import annotations

import time

PROVEN = 1.0
"""Seconds a committed write answers ``ready()`` for (no failure since)."""


def proven(wrote_at: float | None) -> bool:
    """Whether a write committed at ``wrote_at`` (``time.monotonic()``; ``None``: none, or a failure since) answers.

    It is as recent a proof that the storage takes writes as the check's own answer would be
    by the time the caller acts on it (the engine asks before each turn that no claim has
    checked, so a busy store saves a check per turn).
    """
    return wrote_at is not None and time.monotonic() - wrote_at < PROVEN
