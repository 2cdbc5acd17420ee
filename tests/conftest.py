"""The fixture kit every tier shares: the shared reference folder, a store of each kind, the bank agent.

Tiers: ``unit/`` (in this process: no subprocess, server, network or PostgreSQL; ``make quick``),
``integration/`` (servers, processes, PostgreSQL, browser, interop clients, the local model) and
``faults/`` (the kill, stop and race harnesses). Helper modules live in ``kit/`` (on ``pythonpath``).
The ``store`` fixture below runs a test on every store; ``unit/conftest.py`` narrows it to the
in-process stores and ``integration/conftest.py`` to PostgreSQL, so a store test written once in
``unit/`` runs on PostgreSQL when an integration module re-exports it.
"""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Iterator

import pg
import pytest
from banking import PAY, transfer
from store_kinds import open_store
from where import SHARED

from interlock import PromptAgent, SessionStore
from interlock.testing import ScriptedModel

STORES = ("memory", "sqlite", "postgres")


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


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Each kind of store in turn (the tiers' conftests narrow it): ``memory``, ``sqlite``, ``postgres``."""
    return request.param


@pytest.fixture
async def store(store_kind: str, tmp_path: pathlib.Path) -> AsyncIterator[SessionStore]:
    """A fresh, open store of each kind (PostgreSQL: a new schema of the session's cluster)."""
    async with open_store(store_kind, tmp_path) as opened:
        yield opened


@pytest.fixture
def scripted_model() -> ScriptedModel:
    """The bank's model: asks to pay bob 5 (``banking.PAY``), then says ``done``."""
    return ScriptedModel([PAY, "done"])


@pytest.fixture
def bank_agent(store: SessionStore, scripted_model: ScriptedModel) -> PromptAgent:
    """A server-managed bank on ``store``: its transfer pauses for approval until ``banking.APPROVE``."""
    return PromptAgent("bank", scripted_model, tools=[transfer], store=store)
