"""``interlock inbox`` and ``interlock sessions``: pending approvals and stored sessions from a shell.

::

    interlock inbox list --store sessions.db [--agent A] [--tool T] [--older-than 10m] [--in-doubt] [--json]
    interlock inbox show SNAPSHOT_ID --store sessions.db [--json]
    interlock inbox approve SNAPSHOT_ID --store sessions.db --agents app:agents [--ref R] [--as NAME] [--payload JSON]
    interlock inbox reject SNAPSHOT_ID ... [--payload JSON | --output JSON]
    interlock inbox respond SNAPSHOT_ID --output JSON ...
    interlock sessions list | show SESSION_ID | prune [--keep-last N] [--older-than 30d] --store sessions.db

``--store`` (default ``$INTERLOCK_STORE``) is a SQLite path, ``sqlite:///path`` or ``postgresql://...``.
``--agents module:attr`` names an agent, a list or dict of agents, or a function
``(store) -> agents`` (so an app can build its agents over the command's store). ``--server
URL`` answers through an agent served over HTTP (its URL, or the server's with ``--agent``);
listing needs ``--store``: Genkit's protocol has no call that lists snapshots. Answers
are recorded as ``--as NAME`` (default: ``$USER``).

A call whose effect is unknown (an earlier attempt started and never reported back: see
:mod:`interlock.records._journal`) is listed as ``IN DOUBT``; ``show`` prints each call's attempt
history from the effect journal. ``approve`` runs it again with the same idempotency key,
``respond`` says it did happen (with its output), ``reject`` skips it. Exit codes: 0 done, 1 failed
(e.g. no such pending interrupt, or another answer won the race), 2 bad usage.

This module parses the arguments and runs the commands; what they print, as text or JSON, is in
:mod:`interlock.cli._inbox_render`.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import inspect
import json
import os
import sys
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

from ..errors import InterlockError, InvalidArgumentError, UnimplementedError, UsageError
from ..http._client import RemoteAgent
from ..http._inbox_client import InboxClient, is_inbox
from ..inbox._inbox import Approve, Inbox, Reject, Respond
from ..inbox._items import ResumableAgent
from ..records._sessions import utcnow
from ..stores import SessionStore, SnapshotInfo, StoreAdmin
from ..stores._prune import prunable
from ..stores._urls import open_store
from . import _inbox_render as render
from ._arguments import parse_duration, whole
from ._main import Command, CommandError, load_target, register

EXTRA_ACTIONS: dict[
    str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], Coroutine[Any, Any, int]]]
] = {}
"""More ``interlock inbox`` actions by name, as (help, configure, run): ``serve`` comes from cli.inbox_serve."""


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}") from None


# arguments ------------------------------------------------------------------------------------


def _where(p: argparse.ArgumentParser, *, server: bool = True) -> None:
    p.add_argument(
        "--store",
        metavar="URL",
        help="the session store: a SQLite path, sqlite:///path or postgresql://... ($INTERLOCK_STORE)",
    )
    if server:
        p.add_argument("--server", metavar="URL", help="answer through an agent served over HTTP at URL")
        p.add_argument(
            "--header", action="append", default=[], metavar="'NAME: VALUE'", help="HTTP header for --server"
        )
    p.add_argument("--tenant", help="the tenant whose sessions to use")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")


def _configure_inbox(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser("list", help="pending interrupts, the longest-waiting first")
    _where(p)
    p.add_argument("--agent", help="only this agent's interrupts")
    p.add_argument("--tool", help="only calls to this tool")
    p.add_argument("--older-than", type=parse_duration, metavar="AGE", help="only those waiting at least AGE (10m)")
    p.add_argument("--newer-than", type=parse_duration, metavar="AGE", help="only those waiting less than AGE")
    doubt = p.add_mutually_exclusive_group()
    doubt.add_argument(
        "--in-doubt", dest="in_doubt", action="store_const", const=True, help="only calls whose effect is unknown"
    )
    doubt.add_argument(
        "--not-in-doubt", dest="in_doubt", action="store_const", const=False, help="no calls whose effect is unknown"
    )
    p = actions.add_parser("show", help="the interrupts one snapshot waits on, in full")
    p.add_argument("snapshot_id", metavar="SNAPSHOT_ID")
    _where(p)
    p.add_argument("--agent", help="with --server: the agent's name, appended to the server URL")
    for name, text in (
        ("approve", "approve a call (a held call runs; a tool's own interrupt restarts with --payload)"),
        ("reject", "reject a call (a held call never runs; a tool's own interrupt restarts with approved: false)"),
        ("respond", "answer a call with --output; the tool does not run"),
    ):
        p = actions.add_parser(name, help=text, description=text)
        p.add_argument("snapshot_id", metavar="SNAPSHOT_ID")
        _where(p)
        p.add_argument("--agent", help="with --server: the agent's name, appended to the server URL")
        p.add_argument("--agents", metavar="MODULE:ATTR", help="the agents that resume: agent(s) or (store) -> agents")
        p.add_argument("--as", dest="identity", metavar="NAME", help="who answers (default: $USER)")
        p.add_argument("--ref", help="the call to answer, by ref (checked against the snapshot)")
        p.add_argument("--tool", help="the call to answer, by tool name (checked against the snapshot)")
        if name != "respond":
            p.add_argument("--all", action="store_true", help="give this answer to every call the snapshot waits on")
            p.add_argument("--payload", type=_json_arg, metavar="JSON", help="the resume payload of the restart")
        if name != "approve":
            out = "the call's output" if name == "respond" else "answer with this output, not a restart of the tool"
            p.add_argument("--output", type=_json_arg, metavar="JSON", required=name == "respond", help=out)

    text = "give a call more time: move its deadline (whoever may answer it may; audited)"
    p = actions.add_parser("extend", help=text, description=text)
    p.add_argument("snapshot_id", metavar="SNAPSHOT_ID")
    _where(p, server=False)
    p.add_argument("--by", required=True, type=parse_duration, metavar="DURATION", help="how much later: 30m, 2h, 1d")
    p.add_argument("--agents", metavar="MODULE:ATTR", help="the agents whose tools' answer policies decide who may")
    p.add_argument("--as", dest="identity", metavar="NAME", help="who extends (default: $USER)")
    p.add_argument("--ref", help="the call, by ref")
    p.add_argument("--tool", help="the call, by tool name")
    for name, (text, configure, _) in EXTRA_ACTIONS.items():
        configure(actions.add_parser(name, help=text, description=text))


def _configure_sessions(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser("list", help="sessions, the most recently active first")
    _where(p, server=False)
    p.add_argument("--agent", help="only sessions whose latest turn ran on this agent")
    p = actions.add_parser("show", help="a session's snapshots and who answered its interrupts")
    p.add_argument("session_id", metavar="SESSION_ID")
    _where(p, server=False)
    p = actions.add_parser("prune", help="delete old snapshots (every session's latest ones stay)")
    _where(p, server=False)
    p.add_argument(
        "--keep-last", type=whole(1, 1_000_000), metavar="N", help="keep the last N snapshots of every branch"
    )
    p.add_argument("--older-than", type=parse_duration, metavar="AGE", help="delete only snapshots older than AGE")
    p.add_argument("--session", metavar="SESSION_ID", help="prune this session only")
    p.add_argument("--dry-run", action="store_true", help="say what would be deleted, delete nothing")


# running -------------------------------------------------------------------------------------


def _drive(action: Callable[[argparse.Namespace], Coroutine[Any, Any, int]], args: argparse.Namespace) -> int:
    try:
        return asyncio.run(action(args))
    except UsageError as exc:
        raise CommandError(exc.message, code=2) from None
    except InterlockError as exc:
        raise CommandError(f"{exc.message} ({exc.status})", code=1) from None


@asynccontextmanager
async def store_from_args(args: argparse.Namespace) -> AsyncGenerator[SessionStore, None]:
    """The store ``--store`` (or ``$INTERLOCK_STORE``) names, opened; it must exist."""
    given: str | None = args.store
    url = given or os.environ.get("INTERLOCK_STORE")
    if not url:
        raise CommandError("say where the sessions are: --store URL (or $INTERLOCK_STORE)")
    try:
        opened = open_store(url, must_exist=True)
    except (InvalidArgumentError, UnimplementedError) as exc:
        raise CommandError(f"--store {url}: {exc.message}") from None
    async with opened as store:
        yield store


@asynccontextmanager
async def _inbox(
    args: argparse.Namespace, *, answering: bool = False, listing: bool = False
) -> AsyncGenerator[Inbox | InboxClient, None]:
    server: str | None = getattr(args, "server", None)
    if server is None:
        async with store_from_args(args) as store:
            spec: str | None = getattr(args, "agents", None)
            yield Inbox(store, agents=await load_agents(spec, store) if answering and spec else ())
        return
    if args.store:
        raise CommandError("give --store or --server, not both")
    if getattr(args, "identity", None) or args.tenant:
        raise CommandError(
            "with --server the server decides who answers, and for which tenant: send credentials with --header"
        )
    given: list[str] = args.header
    headers = _headers(given)
    if await is_inbox(server, headers):
        async with InboxClient(server, headers=headers) as client:
            yield client
        return
    if listing:
        raise CommandError(
            f"{server} is not an inbox (interlock inbox serve, or serve --inbox); listing an agent server needs "
            "--store: Genkit's HTTP protocol has no call that lists snapshots (`inbox show ID --server URL` works)"
        )
    url = server.rstrip("/") + (f"/{args.agent}" if getattr(args, "agent", None) else "")
    async with RemoteAgent(url, headers=headers) as remote:
        yield Inbox(None, agents=[remote])


def _headers(raw: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in raw:
        name, colon, value = item.partition(":")
        if not colon or not name.strip():
            raise CommandError(f"expected --header 'Name: value', got {item!r}")
        headers[name.strip()] = value.strip()
    return headers


def _is_agent(value: object) -> bool:
    return isinstance(getattr(value, "name", None), str) and callable(getattr(value, "run", None))


async def load_agents(spec: str, store: SessionStore) -> Mapping[str, ResumableAgent] | Sequence[ResumableAgent]:
    """The agents ``--agents module:attr`` names: agent(s), or a function ``(store) -> agents``."""
    target: Any = load_target(spec)
    if callable(target) and not isinstance(target, type) and not _is_agent(target):
        target = target(store)
        if inspect.isawaitable(target):
            target = await target
    if _is_agent(target):
        return [cast(ResumableAgent, target)]
    if isinstance(target, Mapping) and all(_is_agent(v) for v in cast(Mapping[Any, Any], target).values()):
        return {str(k): cast(ResumableAgent, v) for k, v in cast(Mapping[Any, Any], target).items()}
    if isinstance(target, (list, tuple)) and all(_is_agent(v) for v in cast(Sequence[Any], target)):
        return [cast(ResumableAgent, v) for v in cast(Sequence[Any], target)]
    raise CommandError(
        f"--agents {spec} gave a {type(cast(object, target)).__name__}: expected an agent, a list or dict of agents, "
        "or a function (store) -> agents"
    )


# inbox ---------------------------------------------------------------------------------------


async def _inbox_list(args: argparse.Namespace) -> int:
    if args.server and args.store:  # both given: say which one lists
        print(
            f"interlock inbox list: listing from the store {args.store}; "
            f"--server {args.server} is not used for listing",
            file=sys.stderr,
        )
        args = argparse.Namespace(**(vars(args) | {"server": None}))
    async with _inbox(args, listing=True) as inbox:
        items = await inbox.pending(
            agent=args.agent,
            tool=args.tool,
            tenant=args.tenant,
            older_than=args.older_than,
            newer_than=args.newer_than,
            in_doubt=args.in_doubt,
        )
    render.listing(items, as_json=args.json)
    return 0


async def _inbox_show(args: argparse.Namespace) -> int:
    async with _inbox(args) as inbox:
        items = await inbox.get(args.snapshot_id, tenant=args.tenant)
        journal = [await inbox.journal_entry(i) if inbox.store is not None else None for i in items]
    render.snapshot(items, journal, as_json=args.json)
    return 0


async def _inbox_answer(args: argparse.Namespace) -> int:
    action: str = args.action
    sid: str = args.snapshot_id
    every = bool(getattr(args, "all", False))
    if every and (args.ref or args.tool):
        raise CommandError("--all answers every call: drop --ref and --tool")
    identity = None if getattr(args, "server", None) else args.identity or _login()
    payload, output = getattr(args, "payload", None), getattr(args, "output", None)
    answer = (
        Respond(output) if action == "respond" else Approve(payload) if action == "approve" else Reject(payload, output)
    )
    async with _inbox(args, answering=True) as inbox:
        items = await inbox.get(sid, tenant=args.tenant)
        if every:
            out = await inbox.answer_all(sid, answer, identity=identity, tenant=args.tenant)
        else:
            out = await inbox.answer(sid, answer, ref=args.ref, tool=args.tool, identity=identity, tenant=args.tenant)
    answered = [i.label for i in items if every or (args.ref in (None, i.ref) and args.tool in (None, i.tool))]
    render.report(args, action, answered, identity, out)
    return 0


async def _inbox_extend(args: argparse.Namespace) -> int:
    identity = args.identity or _login()
    async with _inbox(args, answering=True) as inbox:
        assert isinstance(inbox, Inbox)  # extend takes --store only
        new = await inbox.extend(
            args.snapshot_id, by=args.by, ref=args.ref, tool=args.tool, identity=identity, tenant=args.tenant
        )
    if args.json:
        render.print_json({"snapshot_id": args.snapshot_id, "expires_at": new.isoformat(), "by": identity})
    else:
        print(f"extended the deadline of snapshot {args.snapshot_id} to {new.isoformat()} as {identity}")
    return 0


def _login() -> str | None:
    """``$USER``, else the login name the system knows, else ``None``."""
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (OSError, KeyError):
        return None


# sessions ------------------------------------------------------------------------------------


async def _sessions_list(args: argparse.Namespace) -> int:
    async with store_from_args(args) as store:
        infos = await store.list(tenant=args.tenant)
    parents = {i.parent_id for i in infos if i.parent_id}
    sessions: dict[str, list[SnapshotInfo]] = {}
    for info in infos:  # newest first
        sessions.setdefault(info.session_id, []).append(info)
    rows: list[tuple[SnapshotInfo, int]] = []
    for snaps in sessions.values():
        latest = next((s for s in snaps if s.snapshot_id not in parents), snaps[0])
        if args.agent is None or latest.agent == args.agent:
            rows.append((latest, len(snaps)))
    rows.sort(key=lambda r: (r[0].created_at, r[0].snapshot_id), reverse=True)
    render.sessions(rows, as_json=args.json)
    return 0


async def _sessions_show(args: argparse.Namespace) -> int:
    async with store_from_args(args) as store:
        infos = sorted(await store.list(tenant=args.tenant, session_id=args.session_id), key=lambda i: i.created_at)
        audit = await Inbox(store).audit(args.session_id, tenant=args.tenant) if infos else []
    if not infos:
        raise CommandError(f"no session with id {args.session_id}", code=1)
    render.session(args.session_id, infos, audit, as_json=args.json)
    return 0


async def _sessions_prune(args: argparse.Namespace) -> int:
    if args.keep_last is None and args.older_than is None:
        raise CommandError("say what to prune: --keep-last N, --older-than AGE, or both")
    async with store_from_args(args) as store:
        return await _prune(store, args)


async def _prune(store: StoreAdmin, args: argparse.Namespace) -> int:
    """``sessions prune`` (or its ``--dry-run``) on the store's :class:`~interlock.stores.StoreAdmin`."""
    scope: dict[str, Any] = {"session_id": args.session, "tenant": args.tenant}
    cutoff = None if args.older_than is None else utcnow() - args.older_than  # (0s is a duration too)
    rule: dict[str, Any] = {"keep_last": args.keep_last, "older_than": cutoff}
    if args.dry_run:
        rows = [(i.snapshot_id, i.parent_id, i.created_at, i.status) for i in await store.list(**scope)]
        doomed = prunable(rows, **rule)
        render.print_json({"would_delete": doomed}) if args.json else print(f"would delete {len(doomed)} snapshots")
        return 0
    deleted = await store.prune(**scope, **rule)
    render.print_json({"deleted": deleted}) if args.json else print(f"deleted {deleted} snapshots")
    return 0


_INBOX = {"list": _inbox_list, "show": _inbox_show, "extend": _inbox_extend} | dict.fromkeys(
    ("approve", "reject", "respond"), _inbox_answer
)
_SESSIONS = {"list": _sessions_list, "show": _sessions_show, "prune": _sessions_prune}

register(
    Command(
        name="inbox",
        help="list, show and answer pending interrupts (approvals) across sessions",
        configure=_configure_inbox,
        run=lambda args: _drive(_INBOX.get(args.action) or EXTRA_ACTIONS[args.action][2], args),
    )
)
register(
    Command(
        name="sessions",
        help="list, show and prune stored sessions",
        configure=_configure_sessions,
        run=lambda args: _drive(_SESSIONS[args.action], args),
    )
)
