"""``interlock db upgrade --store URL``: apply a store's forward schema migrations.

A store whose schema is older than the code refuses to open (``FAILED_PRECONDITION``) and
names this command. It opens the store with ``upgrade=True``: the migrations run in one
transaction, under the store's own lock, so several processes may run it at once. On a
PostgreSQL store with ``interlock[workers]`` installed it also installs the worker queue's
tables (procrastinate's, :mod:`interlock.workers`) when they are missing. It prints the versions,
and exits 1 when the store cannot be opened (unreachable, newer than this interlock, not
interlock's tables).
"""

from __future__ import annotations

import argparse
import asyncio
import os

from ..errors import InterlockError, InvalidArgumentError, UnimplementedError
from ..stores._urls import open_store
from ._main import Command, CommandError, register


def _configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser("upgrade", help="migrate the store's tables to this interlock's schema version")
    p.add_argument(
        "--store",
        metavar="URL",
        help="the store: a SQLite path, sqlite:///path or postgresql://... ($INTERLOCK_STORE)",
    )


async def _upgrade(url: str) -> str:
    try:
        opened = open_store(url, must_exist=True, upgrade=True)
    except (InvalidArgumentError, UnimplementedError) as exc:
        raise CommandError(f"--store {url}: {exc.message}") from None
    async with opened as store:
        await store.ready()
        current: int = getattr(store, "SCHEMA_VERSION", 0)
        found: int | None = getattr(store, "upgraded_from", None)
    said = (
        f"{url}: schema version {current}, nothing to do"
        if found is None
        else f"{url}: upgraded from schema version {found} to {current}"
    )
    return said + await _worker_queue(url)


async def _worker_queue(url: str) -> str:
    """Install the worker queue's tables (procrastinate's) beside a PostgreSQL store, with ``interlock[workers]``."""
    if not url.lower().startswith(("postgresql://", "postgres://")):
        return ""
    try:
        from ..workers import install_schema
    except ModuleNotFoundError:  # no interlock[workers]: no worker queue to install
        return ""
    return f"\n{url}: worker queue tables " + ("installed" if await install_schema(url) else "present")


def _run(args: argparse.Namespace) -> int:
    given: str | None = args.store
    url = given or os.environ.get("INTERLOCK_STORE")
    if not url:
        raise CommandError("say which store to upgrade: --store URL (or $INTERLOCK_STORE)")
    try:
        print(asyncio.run(_upgrade(url)))
    except InterlockError as exc:
        raise CommandError(f"{exc.message} ({exc.status})", code=1) from None
    return 0


register(Command(name="db", help="manage the store's schema (upgrade)", configure=_configure, run=_run))
