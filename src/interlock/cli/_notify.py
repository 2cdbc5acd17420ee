"""``interlock webhooks`` and ``interlock deadlines``: the outbox's delivery and deadline loops.

::

    interlock webhooks run  --store sessions.db --endpoint https://hooks.example/x [--endpoint managers=URL]
                            [--secret-env INTERLOCK_WEBHOOK_SECRET] [--key-id k1] [--once]
    interlock webhooks run  --store sessions.db --config app:webhooks      # a Webhooks object
    interlock webhooks list --store sessions.db [--status pending|done|failed] [--json]
    interlock webhooks prune --store sessions.db --older-than 7d       # drop rows settled over 7 days ago
    interlock webhooks retry --store sessions.db [EVENT_ID ...]        # failed rows (or those) start afresh
    interlock deadlines run --store sessions.db --agents app:agents [--once] [--interval 1]
    interlock deadlines prune --store sessions.db --older-than 7d
    interlock serve app:server --webhooks app:webhooks --deadlines           # both inside the server
                           [--deadline-interval 1] [--deadline-lease 120]

The signing secret is read from an environment variable, never from the command line. The
loops prune their own channel's settled rows once an hour, keeping ``--keep-settled`` (7d).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..errors import UsageError
from ..interrupts._signing import Keyring
from ..notify._deadlines import run_deadlines, sweep
from ..notify._webhooks import Webhooks, endpoints_from_specs
from ..records._outbox import DEADLINE, KEEP_SETTLED, WEBHOOK
from ..records._sessions import utcnow
from ..stores import OutboxStore, SessionStore
from ._arguments import parse_duration, seconds
from ._inbox import _drive, load_agents, store_from_args  # pyright: ignore[reportPrivateUsage]
from ._main import SERVE_EXTENSIONS, Command, CommandError, ServeExtension, ServeLoop, load_target, register


def _webhooks(args: argparse.Namespace) -> Webhooks:
    config: str | None = getattr(args, "config", None)
    if config:
        found: Any = load_target(config)
        if not isinstance(found, Webhooks):
            raise CommandError(f"--config {config} is a {type(found).__name__}, not an interlock.notify.Webhooks")
        return found
    specs: list[str] = args.endpoint or []
    if not specs:
        raise CommandError("say where webhooks go: --endpoint URL (or GROUP=URL), or --config module:attr")
    secret = os.environ.get(args.secret_env)
    if not secret:
        raise CommandError(f"the signing secret is read from ${args.secret_env}, which is not set")
    try:
        return Webhooks(endpoints_from_specs(specs), Keyring({args.key_id: secret}), keep_settled=args.keep_settled)
    except UsageError as exc:
        raise CommandError(exc.message) from None


def _configure_webhooks(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="deliver the outbox's webhooks (until stopped, or --once)")
    run.add_argument("--store", help="the store URL or SQLite path (default $INTERLOCK_STORE)")
    run.add_argument("--endpoint", action="append", metavar="[GROUP=]URL", help="a receiver (repeatable)")
    run.add_argument("--config", metavar="MODULE:ATTR", help="a Webhooks object instead of --endpoint/--secret-env")
    run.add_argument("--secret-env", default="INTERLOCK_WEBHOOK_SECRET", help="the variable holding the secret")
    run.add_argument("--key-id", default="k1", help="the signing key's id (receivers look it up)")
    run.add_argument("--once", action="store_true", help="deliver what is due now, then exit")
    _keep_settled(run)
    _prune_parser(sub, "webhook")
    retry = sub.add_parser("retry", help="give failed webhook rows a fresh start (all, or the ids given)")
    retry.add_argument("--store", help="the store URL or SQLite path (default $INTERLOCK_STORE)")
    retry.add_argument("ids", nargs="*", metavar="EVENT_ID", help="only these rows (default: every failed one)")
    listing = sub.add_parser("list", help="list the outbox's webhook events")
    listing.add_argument("--store", help="the store URL or SQLite path (default $INTERLOCK_STORE)")
    listing.add_argument("--status", choices=["pending", "done", "failed"])
    listing.add_argument("--json", action="store_true", help="one JSON object per line")


def _keep_settled(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--keep-settled",
        type=parse_duration,
        default=KEEP_SETTLED,
        metavar="AGE",
        help="prune settled rows once they are AGE old, once an hour (default 7d)",
    )


def _prune_parser(sub: Any, channel: str) -> None:
    prune = sub.add_parser("prune", help=f"delete the {channel} rows settled (done or failed) over AGE ago")
    prune.add_argument("--store", help="the store URL or SQLite path (default $INTERLOCK_STORE)")
    prune.add_argument("--older-than", type=parse_duration, required=True, metavar="AGE", help="e.g. 7d")


async def _prune(store: OutboxStore, channel: str, args: argparse.Namespace) -> int:
    cutoff = utcnow() - args.older_than
    gone = await store.outbox_prune(channel=channel, settled_before=cutoff)
    print(f"pruned {gone} {channel} row{'' if gone == 1 else 's'} settled before {cutoff.isoformat()}")
    return 0


async def _retry(store: OutboxStore, args: argparse.Namespace) -> int:
    ids: list[str] = args.ids
    again = await store.outbox_retry(channel=WEBHOOK, ids=ids or None)
    for row in again:
        print(f"{row.id}  {row.type:<20} pending again (last error: {row.last_error or '-'})")
    missing = set(ids) - {row.id for row in again}
    if missing:
        raise CommandError(f"not failed webhook rows (nothing done to them): {', '.join(sorted(missing))}", code=1)
    if not again:
        print("no failed webhook rows")
    return 0


async def _webhooks_main(args: argparse.Namespace) -> int:
    async with store_from_args(args) as store:
        if args.action == "list":
            return await _list(store, args)
        if args.action == "prune":
            return await _prune(store, WEBHOOK, args)
        if args.action == "retry":
            return await _retry(store, args)
        hooks = _webhooks(args)
        if args.once:
            for row in await hooks.deliver_due(store):
                print(f"{row.id} {row.type} {row.status} attempts={row.attempts}")
            return 0
        await hooks.run(store)
    return 0


async def _list(store: OutboxStore, args: argparse.Namespace) -> int:
    for row in await store.outbox_events(channel=WEBHOOK, status=args.status):
        if args.json:
            print(json.dumps(row.to_json(), ensure_ascii=False))
        else:
            error = f" last error: {row.last_error}" if row.last_error else ""
            print(f"{row.id}  {row.type:<20} {row.status:<8} attempts={row.attempts}{error}")
    return 0


def _configure_deadlines(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="apply the policies of passed deadlines (until stopped, or --once)")
    run.add_argument("--store", help="the store URL or SQLite path (default $INTERLOCK_STORE)")
    run.add_argument("--agents", metavar="MODULE:ATTR", help="the agents that resume: agent(s) or (store) -> agents")
    run.add_argument("--interval", type=seconds, default=1.0, help="seconds between sweeps (default 1)")
    run.add_argument("--once", action="store_true", help="sweep once, then exit")
    _keep_settled(run)
    _prune_parser(sub, "deadline")


async def _deadlines_main(args: argparse.Namespace) -> int:
    async with store_from_args(args) as store:
        if args.action == "prune":
            return await _prune(store, DEADLINE, args)
        agents = await load_agents(args.agents, store) if args.agents else ()
        if args.once:
            for done in await sweep(store, agents):
                print(f"{done.snapshot_id} {done.tool} {done.policy or '-'} {done.result} {done.message}".rstrip())
            return 0
        await run_deadlines(store, agents, interval=args.interval, keep_settled=args.keep_settled)
    return 0


# inside interlock serve ---------------------------------------------------------------------


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """``interlock serve``'s ``--webhooks`` and ``--deadlines``."""
    parser.add_argument("--webhooks", metavar="MODULE:ATTR", help="deliver webhooks with this Webhooks object")
    parser.add_argument("--deadlines", action="store_true", help="apply passed deadlines of the served agents")
    parser.add_argument(
        "--deadline-interval", type=seconds, default=1.0, metavar="S", help="with --deadlines: seconds between sweeps"
    )
    parser.add_argument(
        "--deadline-lease",
        type=seconds,
        default=120.0,
        metavar="S",
        help="with --deadlines: seconds one timer's work may take before another process may take it over",
    )


def serve_loops(args: argparse.Namespace, agents: list[Any]) -> list[ServeLoop]:
    """The loops ``interlock serve`` runs beside the app, over the served agents' stores."""
    stores: list[SessionStore] = []
    for agent in agents:
        store: SessionStore | None = getattr(agent, "store", None)
        if store is not None and all(store is not s for s in stores):
            stores.append(store)
    loops: list[ServeLoop] = []
    if args.webhooks or args.deadlines:
        if not stores:
            raise CommandError("--webhooks and --deadlines need served agents with a store")
    if args.webhooks:
        found: Any = load_target(args.webhooks)
        if not isinstance(found, Webhooks):
            raise CommandError(f"--webhooks {args.webhooks} is a {type(found).__name__}, not a Webhooks")
        loops += [_hook_loop(found, s) for s in stores]
    if args.deadlines:
        loops += [_deadline_loop(s, agents, args.deadline_interval, args.deadline_lease) for s in stores]
    return loops


def _hook_loop(hooks: Webhooks, store: OutboxStore) -> ServeLoop:
    return lambda stop: hooks.run(store, stop=stop)


def _deadline_loop(store: SessionStore, agents: list[Any], interval: float, lease: float) -> ServeLoop:
    return lambda stop: run_deadlines(store, agents, interval=interval, lease=lease, stop=stop)


SERVE_EXTENSIONS.append(ServeExtension(configure=add_serve_options, loops=serve_loops))
register(
    Command(
        name="webhooks",
        help="deliver the outbox's signed webhooks",
        configure=_configure_webhooks,
        run=lambda args: _drive(_webhooks_main, args),
    )
)
register(
    Command(
        name="deadlines",
        help="apply the policies of interrupts whose deadline passed",
        configure=_configure_deadlines,
        run=lambda args: _drive(_deadlines_main, args),
    )
)
