"""``interlock inbox serve`` and ``interlock serve ... --inbox``: the inbox's web page and API on uvicorn.

::

    interlock inbox serve --store sessions.db --agents app:agents [--token T --user NAME | --context app:who]
                          [--session-max-age 12h]
    interlock serve app:server --inbox [--inbox-token T --inbox-user NAME --inbox-session-max-age 12h]

The inbox must know who answers. ``--context module:attr`` names the context hook (the agent
server's, for ``serve --inbox``: its ``context``); without one, one user signs in with a
token (``--token``, else a random one), and the command prints the sign-in link
(``.../?key=TOKEN``; a sign-in lasts ``--session-max-age``). ``serve --inbox`` mounts the inbox
at ``/inbox`` beside the agents, over the store they share.
"""

from __future__ import annotations

import argparse
import getpass
import secrets
import sys
from typing import Any, cast

from ..http._server import AgentServer
from ..inbox._inbox import Inbox
from ._arguments import seconds, whole
from ._inbox import EXTRA_ACTIONS, load_agents, store_from_args
from ._main import COMMANDS, SERVE_EXTENSIONS, Command, CommandError, as_app, load_target, register, run_app

_MAX_AGE = 12 * 3600.0
_MAX_AGE_HELP = "how long a sign-in (the ?key= link's cookie) lasts, e.g. 30m, 8h (default 12h)"


def _web() -> Any:
    try:
        from ..http import _inbox as web  # pyright: ignore[reportPrivateUsage]  (the inbox extra, imported on use)
    except ImportError as exc:
        raise CommandError(str(exc), code=1) from None
    return web


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store", metavar="URL", help="the session store: a SQLite path or sqlite:///path ($INTERLOCK_STORE)"
    )
    p.add_argument(
        "--agents", metavar="MODULE:ATTR", required=True, help="the agents that resume: agent(s) or (store) -> agents"
    )
    p.add_argument("--context", metavar="MODULE:ATTR", help="the context hook that says who asks (identity, tenant)")
    p.add_argument("--token", help="one user's sign-in token (default: a random one, printed)")
    p.add_argument("--user", help="who that user answers as (default: $USER)")
    p.add_argument("--session-max-age", type=seconds, default=_MAX_AGE, metavar="AGE", help=_MAX_AGE_HELP)
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=whole(0, 65535), default=8000, help="port to bind (default 8000)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def _sign_in(args: argparse.Namespace, context: object, token: str | None, path: str = "") -> str | None:
    if context is not None and token is None:
        return None
    token = token or secrets.token_urlsafe(24)
    print(f"inbox: http://{args.host}:{args.port}{path}/?key={token}", file=sys.stderr, flush=True)
    return token


async def _run(args: argparse.Namespace) -> int:
    web = _web()
    context = load_target(args.context) if args.context else None
    token = _sign_in(args, context, args.token)
    async with store_from_args(args) as store:
        inbox = Inbox(store, agents=await load_agents(args.agents, store))
        user = args.user or getpass.getuser()
        app = web.InboxApp(inbox, context=context, token=token, user=user, session_max_age=args.session_max_age)
        import uvicorn

        config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, lifespan="off")
        await uvicorn.Server(config).serve()
    return 0


EXTRA_ACTIONS["serve"] = ("serve the inbox's web page and HTTP API", _configure, _run)

# serve ... --inbox -----------------------------------------------------------------------------

_plain = COMMANDS["serve"]


def _configure_serve(p: argparse.ArgumentParser) -> None:
    _plain.configure(p)
    p.add_argument("--inbox", action="store_true", help="also serve the inbox (web page and API) at /inbox")
    p.add_argument("--inbox-token", metavar="TOKEN", help="with --inbox and no context hook: one user's token")
    p.add_argument("--inbox-user", metavar="NAME", help="who that user answers as (default: $USER)")
    p.add_argument("--inbox-session-max-age", type=seconds, default=_MAX_AGE, metavar="AGE", help=_MAX_AGE_HELP)


def _serve(args: argparse.Namespace) -> int:
    if not args.inbox:
        return _plain.run(args)
    app = as_app(load_target(args.target), base_path=args.base_path)
    if not isinstance(app, AgentServer):
        raise CommandError("--inbox needs agents (an agent, a list or dict of them, or an AgentServer) to serve")
    if getattr(args, "workers", 1) > 1:
        raise CommandError("--inbox runs in one process: leave out --workers, or run `interlock inbox serve` apart")
    stores = {id(a.store): a.store for a in app.agents.values() if a.store is not None}
    if len(stores) != 1:
        raise CommandError(f"--inbox needs the agents to share one store (they have {len(stores)})")
    web = _web()
    token = _sign_in(args, app.context, args.inbox_token, "/inbox")
    store = next(iter(stores.values()))
    inbox = Inbox(store, agents=cast(dict[str, Any], app.agents))
    user = args.inbox_user or getpass.getuser()
    loops = [loop for extension in SERVE_EXTENSIONS for loop in extension.loops(args, list(app.agents.values()))]
    web_app = web.InboxApp(
        inbox, context=app.context, token=token, user=user, session_max_age=args.inbox_session_max_age
    )
    served = web.mount_inbox(app, web_app)
    return run_app(served, args, loops)


register(
    Command(
        name="serve",
        help=_plain.help + " (--inbox: and the approval inbox)",
        configure=_configure_serve,
        run=_serve,
        log_level=_plain.log_level,
    )
)
