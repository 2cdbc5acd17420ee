"""Shared fixtures."""

from __future__ import annotations

import pathlib

import pytest

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    """The workplace's shared reference folder (spec, captures), beside the checkout."""
    if not SHARED.is_dir():
        pytest.fail(f"expected the shared reference folder at {SHARED}")
    return SHARED
