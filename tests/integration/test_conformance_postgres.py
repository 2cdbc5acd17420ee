"""Genkit's agent conformance cases of ``unit/test_conformance.py`` on a PostgreSQL store shared between processes."""

from __future__ import annotations

import pytest
from test_conformance import test_conformance_on_a_shared_store

__all__ = ["test_conformance_on_a_shared_store"]


@pytest.fixture(params=["postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    """The shared store this module runs the cases on (SQLite: unit/test_conformance.py)."""
    return request.param
