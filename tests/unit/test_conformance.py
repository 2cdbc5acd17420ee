"""Every case of Genkit's agent conformance spec, through our public API: local agents, on every store."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from conformance import build_agents, load_cases, run_case
from store_kinds import stores_of
from where import SHARED

from interlock import InMemoryStore
from interlock.testing import ScriptedModel

CASES = load_cases(SHARED)


def test_spec_has_every_case() -> None:
    assert len(CASES) == 39


def _set_model(agent: Any, model: ScriptedModel) -> None:
    if hasattr(agent, "model"):
        agent.model = model


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_conformance(case: dict[str, Any]) -> None:
    await run_case(case, build_agents(InMemoryStore), set_model=_set_model)


@pytest.fixture(params=["sqlite"])
def kind(request: pytest.FixtureRequest) -> str:
    """The store shared between processes this tier runs the cases on (PostgreSQL: integration/)."""
    return request.param


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_conformance_on_a_shared_store(case: dict[str, Any], kind: str, tmp_path: pathlib.Path) -> None:
    async with stores_of(kind, tmp_path) as make:
        await run_case(case, build_agents(make), set_model=_set_model)
