"""``interlock serve MODULE:ATTR --mcp``: the agents as MCP tools at ``/mcp``, beside the Genkit routes.

::

    export INTERLOCK_MCP_KEYS=$(python -c 'import secrets; print(secrets.token_hex(32))')
    interlock serve app:agents --mcp [--mcp-state-ttl 10m] [--mcp-key-env INTERLOCK_MCP_KEYS]

The secrets sealing a paused call's ``requestState`` are read from an environment variable
(comma-separated, the first sealing, each opening, so keys rotate), never from the command
line. Without one, the process makes a random key: a paused call cannot then be answered
over MCP after a restart (the inbox still can), and ``--workers`` is refused.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import UsageError
from ._arguments import seconds
from ._main import SERVE_EXTENSIONS, CommandError, ServeExtension

KEYS_ENV = "INTERLOCK_MCP_KEYS"


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """``interlock serve``'s ``--mcp``, ``--mcp-state-ttl`` and ``--mcp-key-env``."""
    group = parser.add_argument_group("MCP (the mcp extra)")
    group.add_argument(
        "--mcp",
        action="store_true",
        help="also serve each agent as an MCP tool (Streamable HTTP, MCP 2026-07-28) at <base-path>/mcp; "
        "a paused turn answers InputRequiredResult",
    )
    group.add_argument(
        "--mcp-state-ttl",
        type=seconds,
        default=600.0,
        metavar="S",
        help="with --mcp: seconds (or 10m, 1h) a paused call's requestState can be answered with (default 600)",
    )
    group.add_argument(
        "--mcp-key-env",
        default=KEYS_ENV,
        metavar="NAME",
        help=f"with --mcp: the variable holding the requestState keys, comma-separated, the first sealing "
        f"(default ${KEYS_ENV}; unset: a random key of this process)",
    )


def serve_mounts(args: argparse.Namespace) -> list[Any]:
    """The MCP endpoint, when ``--mcp`` asks for it."""
    if not getattr(args, "mcp", False):
        return []
    try:
        from ..http._mcp import MCP
    except ImportError as exc:
        raise CommandError(str(exc), code=1) from None
    text = os.environ.get(args.mcp_key_env, "")
    keys = [k.strip() for k in text.split(",") if k.strip()] or None
    if keys is None and getattr(args, "workers", 1) > 1:
        raise CommandError(
            f"--mcp with --workers needs a key every worker shares: set ${args.mcp_key_env} "
            "(e.g. python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    try:
        return [MCP(keys=keys, state_ttl=args.mcp_state_ttl)]
    except UsageError as exc:  # a key too short
        raise CommandError(f"${args.mcp_key_env}: {exc.message}") from None


SERVE_EXTENSIONS.append(ServeExtension(configure=add_serve_options, mounts=serve_mounts))
