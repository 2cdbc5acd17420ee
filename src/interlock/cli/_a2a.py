"""``interlock serve MODULE:ATTR --a2a``: the served agents as A2A agents too, at ``/a2a/{agent}`` (docs/a2a.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ._arguments import seconds
from ._main import SERVE_EXTENSIONS, CommandError, ServeExtension


def _configure(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("A2A")
    group.add_argument("--a2a", action="store_true", help="serve each agent over A2A at /a2a/{agent} too")
    group.add_argument(
        "--a2a-wait",
        type=seconds,
        default=300.0,
        metavar="S",
        help="how long a blocking A2A SendMessage waits for its task to settle or pause (default 300)",
    )


def _mounts(args: argparse.Namespace) -> list[Any]:
    if not getattr(args, "a2a", False):
        return []
    try:
        from ..http._a2a import A2A
    except ImportError as exc:
        raise CommandError(str(exc), code=1) from None
    return [A2A(wait=args.a2a_wait)]


SERVE_EXTENSIONS.append(ServeExtension(configure=_configure, mounts=_mounts))
