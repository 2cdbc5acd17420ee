"""Shared fixtures."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pg
import pytest

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    """The workplace's shared reference folder (spec, captures), beside the checkout."""
    if not SHARED.is_dir():
        pytest.fail(f"expected the shared reference folder at {SHARED}")
    return SHARED


@pytest.fixture(scope="session", autouse=True)
def postgres_cluster() -> Iterator[None]:
    """Stops the PostgreSQL cluster the session started on first use (``pg.cluster_dsn``), if it did."""
    yield
    pg.stop_started()
