"""The metadata keys of interrupt state, spelled once (Genkit's wire names)."""

from __future__ import annotations

RECLAIMED_FROM = "reclaimedFrom"
"""Snapshot metadata: the turn whose lapsed claim a resume took over."""
