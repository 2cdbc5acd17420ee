"""The health route of :class:`~interlock.http.AgentServer`: ``GET <base>/healthz``.

It answers ``200 {"status": "SERVING", "stores": {agent: "ok"}}`` when every store-backed agent's
store takes writes now (:meth:`~interlock.stores.SnapshotStore.ready`), and ``503`` with
``"status": "NOT_SERVING"`` and the failing stores' canonical statuses otherwise (e.g.
``"PERMISSION_DENIED"`` for a read-only SQLite file, ``"DEADLINE_EXCEEDED"`` for a store that
does not answer in time). Client-managed agents (no store) have nothing to check and are not
listed. A store shared by several agents is checked once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ..agents._agent import Agent
from ..errors import InterlockError
from ..stores import SnapshotStore

logger = logging.getLogger("interlock.http")

HEALTH_ROUTE = "healthz"
"""The path, below the server's base path, that ``GET`` answers with the health report."""


async def health_report(agents: Mapping[str, Agent], *, timeout: float) -> tuple[dict[str, Any], int]:
    """The health body and HTTP code for ``agents`` (by URL name)."""
    stores = {name: agent.store for name, agent in agents.items() if agent.store is not None}
    unique = {id(s): s for s in stores.values()}
    results = await asyncio.gather(*(_check(s, timeout) for s in unique.values()))
    by_store = dict(zip(unique, results, strict=True))
    report = {name: by_store[id(store)] for name, store in stores.items()}
    healthy = all(result == "ok" for result in report.values())
    return {"status": "SERVING" if healthy else "NOT_SERVING", "stores": report}, 200 if healthy else 503


async def _check(store: SnapshotStore, timeout: float) -> str:
    try:
        async with asyncio.timeout(timeout):
            await store.ready()
    except InterlockError as exc:
        return exc.status
    except TimeoutError:
        return "DEADLINE_EXCEEDED"
    except Exception:
        logger.exception("the health check of store %r failed", store)
        return "INTERNAL"
    return "ok"
