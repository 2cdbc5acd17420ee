"""The unit tier's stores: in this process only (memory and SQLite); PostgreSQL runs in ``integration/``."""

from __future__ import annotations

import pytest
from store_kinds import LOCAL


@pytest.fixture(params=LOCAL)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Memory, then SQLite: the ``store`` fixture (tests/conftest.py) opens one of each."""
    return request.param
