"""The ``interlock`` command line.

Sub-commands live in a registry, so other modules can add theirs::

    from interlock.cli.main import Command, register

    register(Command(name="demo", help="run the demo", configure=add_arguments, run=run_demo))

and list that module in :data:`COMMAND_MODULES` (imported when the command line starts).

``interlock serve module:attr`` serves an agent, a list or dict of agents, an
:class:`~interlock.http.server.AgentServer` or any ASGI app on uvicorn, logging one line per
turn. Exit codes: 0 success, 1 runtime failure, 2 bad usage (e.g. a target that cannot
be imported). ``--webhooks module:attr`` (a :class:`~interlock.webhooks.Webhooks`) and
``--deadlines`` run the outbox's delivery and deadline loops in the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

__all__ = [
    "COMMANDS",
    "COMMAND_MODULES",
    "SERVE_EXTENSIONS",
    "Command",
    "CommandError",
    "ServeExtension",
    "ServeLoop",
    "load_target",
    "main",
    "register",
]


class CommandError(Exception):
    """A command failed in a way the user can fix; the message is printed, the process exits with ``code``."""

    def __init__(self, message: str, *, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """One sub-command: its name, help, how it adds its arguments, and what it runs (returns the exit code)."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}
"""The registered sub-commands, by name."""

ServeLoop = Callable[[asyncio.Event], Awaitable[None]]
"""A background loop ``interlock serve`` runs beside the app, until the event is set."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServeExtension:
    """Options of ``interlock serve`` a command module adds, and the loops they start (given the served agents)."""

    configure: Callable[[argparse.ArgumentParser], None]
    loops: Callable[[argparse.Namespace, list[Any]], list[ServeLoop]]


SERVE_EXTENSIONS: list[ServeExtension] = []
"""Registered by command modules (``interlock.cli.notify``: ``--webhooks``, ``--deadlines``)."""
COMMAND_MODULES: list[str] = ["interlock.cli.demo", "interlock.cli.inbox", "interlock.cli.notify"]
"""Modules that register sub-commands; :func:`main` imports them first."""


def register(command: Command) -> Command:
    """Add (or replace) a sub-command."""
    COMMANDS[command.name] = command
    return command


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="interlock", description="LLM agents that pause for people.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        command.configure(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    parser = build_parser()
    args = parser.parse_args(argv)
    command = COMMANDS.get(args.command or "")
    if command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return command.run(args)
    except CommandError as exc:
        print(f"interlock {command.name}: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


# serve ------------------------------------------------------------------------------------


def load_target(spec: str) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted); the current directory is importable."""
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        raise CommandError(f"expected a target like 'package.module:attribute', got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandError(f"cannot import module {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise CommandError(f"module {module_name!r} has no attribute {attr!r}") from None
    return value


def as_app(target: Any, *, base_path: str = "") -> Any:
    """An ASGI app for an agent, a list or dict of agents, or an app (returned as is)."""
    from ..agents import Agent
    from ..http.server import AgentServer

    if isinstance(target, Agent):
        return AgentServer([target], base_path=base_path)
    if isinstance(target, AgentServer):
        if base_path:
            target.base_path = "/" + base_path.strip("/")
        return target
    if callable(target) and not isinstance(target, type):
        return target
    agents = _agents_of(target)
    if agents:
        return AgentServer(agents, base_path=base_path)
    raise CommandError(f"cannot serve a {type(target).__name__}: expected an agent, agents, or an ASGI app")


def _agents_of(target: object) -> dict[str, Any] | list[Any] | None:
    from ..agents import Agent

    if isinstance(target, Mapping):
        found = dict(cast(Mapping[str, Any], target))
        return found if all(isinstance(v, Agent) for v in found.values()) else None
    if isinstance(target, (list, tuple, set, frozenset)):
        items = list(cast(Sequence[Any], target))
        return items if all(isinstance(v, Agent) for v in items) else None
    return None


def _configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="what to serve, as module:attribute (an agent, a list/dict, or an ASGI app)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    parser.add_argument("--base-path", default="", help="URL prefix of every agent route, e.g. /api")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    for extension in SERVE_EXTENSIONS:
        extension.configure(parser)


def _serve(args: argparse.Namespace) -> int:
    from ..http.server import AgentServer

    app = as_app(load_target(args.target), base_path=args.base_path)
    agents = list(app.agents.values()) if isinstance(app, AgentServer) else []
    loops = [loop for extension in SERVE_EXTENSIONS for loop in extension.loops(args, agents)]
    try:
        import uvicorn
    except ImportError:
        raise CommandError("serving needs uvicorn: pip install 'interlock[server]'", code=1) from None
    level = getattr(logging, str(args.log_level).upper())
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("interlock").setLevel(level)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, lifespan="auto")
    asyncio.run(_serve_with(uvicorn.Server(config), loops))
    return 0


async def _serve_with(server: Any, loops: Sequence[ServeLoop]) -> None:
    """Run the uvicorn server with the background loops (webhooks, deadlines) beside it; stop them after it."""
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(loop(stop)) for loop in loops]
    try:
        await server.serve()
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


register(Command(name="serve", help="serve agents over Genkit's HTTP protocol", configure=_configure_serve, run=_serve))
