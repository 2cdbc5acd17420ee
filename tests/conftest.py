"""Shared fixtures."""

from __future__ import annotations

import os
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
def postgres() -> Iterator[str]:
    """The session's PostgreSQL cluster (started by scripts/postgres.sh unless INTERLOCK_TEST_PG_DSN names one).

    Its DSN is exported as INTERLOCK_TEST_PG_DSN, so worker processes of the tests reach it too.
    """
    existing = os.environ.get(pg.ENV)
    if existing:
        yield existing
        return
    try:
        dsn, directory = pg.start_cluster()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    os.environ[pg.ENV] = dsn
    try:
        yield dsn
    finally:
        os.environ.pop(pg.ENV, None)
        pg.stop_cluster(directory)
