"""``interlock serve MODULE:ATTR --ag-ui``: serve AG-UI 1.0 beside the Genkit routes.

::

    interlock serve app:agent --ag-ui                 # POST /ag-ui/<agentName>
    interlock serve app:agent --ag-ui --ag-ui-prefix /copilot

The route takes an AG-UI ``RunAgentInput`` and answers the run's event stream
(:mod:`interlock.http._agui`); it needs the ``ag-ui`` extra (``pip install 'interlock[ag-ui]'``).
"""

from __future__ import annotations

import argparse
from typing import Any

from ._main import SERVE_EXTENSIONS, CommandError, ServeExtension


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """``--ag-ui`` and ``--ag-ui-prefix`` of ``interlock serve``."""
    group = parser.add_argument_group("AG-UI")
    group.add_argument("--ag-ui", action="store_true", help="also serve AG-UI 1.0 runs at POST <prefix>/<agentName>")
    group.add_argument("--ag-ui-prefix", default="/ag-ui", metavar="PATH", help="where AG-UI is served (/ag-ui)")


def serve_mounts(args: argparse.Namespace) -> list[Any]:
    """The AG-UI mount, when ``--ag-ui`` is given."""
    if not args.ag_ui:
        return []
    try:
        from ..http._agui import AGUI
    except ImportError as exc:
        raise CommandError(f"--ag-ui needs the ag-ui extra (pip install 'interlock[ag-ui]'): {exc}") from None
    return [AGUI(prefix=args.ag_ui_prefix)]


SERVE_EXTENSIONS.append(ServeExtension(configure=add_serve_options, mounts=serve_mounts))
