"""Every case of Genkit's agent conformance spec, run through our public API (local agents, both stores)."""

from __future__ import annotations

import itertools
import pathlib
from typing import Any

import pytest
from conformance import build_agents, load_cases, run_case

from interlock import InMemoryStore
from interlock.stores.sqlite import SQLiteStore
from interlock.testing import ScriptedModel

CASES = load_cases(pathlib.Path(__file__).resolve().parents[2] / "shared")


def test_spec_has_every_case() -> None:
    assert len(CASES) == 39


def _set_model(agent: Any, model: ScriptedModel) -> None:
    if hasattr(agent, "model"):
        agent.model = model


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_conformance(case: dict[str, Any]) -> None:
    await run_case(case, build_agents(InMemoryStore), set_model=_set_model)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_conformance_on_sqlite(case: dict[str, Any], tmp_path: pathlib.Path) -> None:
    counter = itertools.count()
    stores: list[SQLiteStore] = []

    def make() -> SQLiteStore:
        stores.append(SQLiteStore(tmp_path / f"store{next(counter)}.db"))
        return stores[-1]

    try:
        await run_case(case, build_agents(make), set_model=_set_model)
    finally:
        for store in stores:
            await store.close()
