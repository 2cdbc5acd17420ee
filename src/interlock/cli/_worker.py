"""``interlock worker --store postgresql://... --agents module:attr``: run detached turns from the worker queue.

The worker takes the jobs that agents with ``detach_to`` (or ``interlock serve
--detach-to-workers``) enqueue, in the store's PostgreSQL database, and runs their turns
(:mod:`interlock.workers._run`): a lease with a fencing token per run, heartbeats, a sweeper
that re-runs the turns of workers that died, abort, and on SIGTERM/SIGINT a graceful stop
that waits ``--grace`` seconds and then hands unfinished turns back to the other workers. It runs
on uvloop when it is installed, as ``interlock serve`` does.

It also adds ``--detach-to-workers`` to ``interlock serve``: each served agent's detached
turns go to the worker queue in its store's database instead of running in the server.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from ..agents._agent import Agent
from ..errors import InterlockError
from ._arguments import seconds, whole
from ._main import (
    SERVE_EXTENSIONS,
    Command,
    CommandError,
    ServeExtension,
    ServeLoop,
    agents_of,
    export_traces,
    load_target,
    register,
)

log = logging.getLogger("interlock.workers")


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL", required=True, help="the agents' PostgreSQL store (postgresql://...)")
    parser.add_argument(
        "--agents", metavar="MODULE:ATTR", required=True, help="the agents to run: an agent, a list or dict of them"
    )
    parser.add_argument("--queue", default="interlock", help="the procrastinate queue (default interlock)")
    parser.add_argument(
        "--concurrency", type=whole(1, 10_000), default=8, metavar="N", help="turns run at once (default 8)"
    )
    parser.add_argument(
        "--lease", type=seconds, default=30.0, metavar="S", help="a run's lease, in seconds (default 30)"
    )
    parser.add_argument(
        "--stalled-after",
        type=seconds,
        default=30.0,
        metavar="S",
        help="retry the jobs of a worker silent this long (default 30)",
    )
    parser.add_argument("--sweep-every", type=seconds, default=5.0, metavar="S", help="seconds between sweeps")
    parser.add_argument(
        "--grace", type=seconds, default=30.0, metavar="S", help="on SIGTERM, wait this long before handing back"
    )
    parser.add_argument("--poll", type=seconds, default=1.0, metavar="S", help="fallback poll for retried jobs (s)")


def served_agents(target: Any) -> list[Agent]:
    """The agents a ``module:attr`` target names: an agent, a list or dict of agents, or an AgentServer's."""
    from ..http._server import AgentServer

    if isinstance(target, Agent):
        return [target]
    if isinstance(target, AgentServer):
        return list(target.agents.values())
    found = agents_of(target)
    if not found:
        raise CommandError(f"--agents must name an agent, or a list or dict of agents; got {type(target).__name__}")
    return list(found.values()) if isinstance(found, dict) else list(found)


def _postgres_dsn(agent: Agent) -> str:
    from ..stores.postgres import PostgresStore

    if not isinstance(agent.store, PostgresStore):
        raise CommandError(
            f"agent {agent.name!r} needs a PostgresStore to run on workers (its store is {agent.store!r}): "
            "the worker queue lives in the store's database"
        )
    return agent.store.dsn


async def _work(args: argparse.Namespace, agents: list[Agent]) -> None:
    from ..stores._urls import open_store
    from ..workers import WorkerQueue
    from ..workers._run import TurnWorker, WorkerSettings

    settings = WorkerSettings(
        concurrency=cast(int, args.concurrency),
        lease=cast(float, args.lease),
        stalled_after=cast(float, args.stalled_after),
        sweep_every=cast(float, args.sweep_every),
        grace=cast(float, args.grace),
        poll=cast(float, args.poll),
    )
    async with open_store(cast(str, args.store)) as store:
        worker = TurnWorker(store, {a.name: a for a in agents}, WorkerQueue(args.store, queue=args.queue), settings)
        log.info("worker: agents %s on queue %s", ", ".join(a.name for a in agents), args.queue)
        await worker.run()


def _run(args: argparse.Namespace) -> int:
    agents = served_agents(load_target(cast(str, args.agents)))
    for agent in agents:
        _postgres_dsn(agent)
    export_traces()  # as `serve` does: OTEL_* variables, when interlock[otel] is installed
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_work(args, agents))
    except ModuleNotFoundError as exc:
        raise CommandError(str(exc), code=1) from None
    except InterlockError as exc:
        raise CommandError(f"{exc.message} ({exc.status})", code=1) from None
    return 0


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop to run on: uvloop's when it is installed (as ``interlock serve`` runs), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - the server extra installs it
        return None
    return uvloop.new_event_loop


# serve --detach-to-workers ---------------------------------------------------------------------


def _configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--detach-to-workers",
        action="store_true",
        help="send detached turns to `interlock worker` processes (the queue in each agent's PostgreSQL store)",
    )


def _serve_loops(args: argparse.Namespace, agents: list[Any]) -> list[ServeLoop]:
    if not getattr(args, "detach_to_workers", False):
        return []
    if cast(int, getattr(args, "workers", 1)) > 1:
        raise CommandError("--detach-to-workers configures the agents of one process: leave out --workers")
    try:
        from ..workers import WorkerQueue
    except ModuleNotFoundError as exc:
        raise CommandError(str(exc), code=1) from None
    if not agents:
        raise CommandError("--detach-to-workers needs agents to serve (an agent, a list or dict, or an AgentServer)")
    queues: dict[str, WorkerQueue] = {}
    for agent in cast(list[Agent], agents):
        dsn = _postgres_dsn(agent)
        agent.host = replace(agent.host, detach_to=queues.setdefault(dsn, WorkerQueue(dsn)))

    async def close_queues(stop: asyncio.Event) -> None:
        await stop.wait()
        for queue in queues.values():
            await queue.aclose()

    return [close_queues]


register(Command(name="worker", help="run detached turns from the worker queue", configure=_configure, run=_run))
SERVE_EXTENSIONS.append(ServeExtension(configure=_configure_serve, loops=_serve_loops))
