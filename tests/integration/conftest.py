"""The integration tier's store: PostgreSQL (the in-process stores run the same tests in ``unit/``)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    """PostgreSQL: the ``store`` fixture (tests/conftest.py) opens a new schema of the session's cluster."""
    return request.param
