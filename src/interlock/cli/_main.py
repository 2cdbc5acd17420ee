"""The ``interlock`` command line.

Sub-commands live in a registry, so other modules can add theirs::

    from interlock.cli._main import Command, register

    register(Command(name="demo", help="run the demo", configure=add_arguments, run=run_demo))

and list that module in :data:`COMMAND_MODULES` (imported when the command line starts).

``interlock serve module:attr`` serves an agent, a list or dict of agents, an
:class:`~interlock.http.AgentServer` or any ASGI app on uvicorn, logging one line per
turn; anything else is refused, naming what it found. ``--workers N`` starts N worker
processes (each imports the target); ``--timeout-keep-alive`` is passed to uvicorn. ``--http``
and ``--loop`` pick uvicorn's HTTP parser and event loop: by default httptools and uvloop when
they are installed (``interlock[server]`` installs them), else h11 and asyncio. uvicorn's access
log (a line per request) is off unless ``--access-log``: the server logs one line per turn. Exit
codes: 0 success, 1 runtime failure, 2 bad usage (e.g. a target that cannot be imported),
130 interrupted. ``--webhooks module:attr`` (a
:class:`~interlock.notify.Webhooks`) and ``--deadlines`` run the outbox's delivery and
deadline loops in the same process. ``--mcp`` also serves each agent as an MCP tool at ``/mcp``
(:mod:`interlock.cli._mcp`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..telemetry import configure_from_env, configure_logging
from ._arguments import seconds, whole


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
    log_level: str = "warning"
    """The ``--log-level`` when none is given."""


COMMANDS: dict[str, Command] = {}
"""The registered sub-commands, by name."""

ServeLoop = Callable[[asyncio.Event], Awaitable[None]]
"""A background loop ``interlock serve`` runs beside the app, until the event is set."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServeExtension:
    """What a command module adds to ``interlock serve``.

    Its options, the loops they start (given the served agents), and the wire protocols they
    mount beside the Genkit routes (``--mcp``, ``--ag-ui``, ``--a2a``).
    """

    configure: Callable[[argparse.ArgumentParser], None]
    loops: Callable[[argparse.Namespace, list[Any]], list[ServeLoop]] = lambda args, agents: []
    mounts: Callable[[argparse.Namespace], list[Any]] = lambda args: []


SERVE_EXTENSIONS: list[ServeExtension] = []
"""Registered by command modules (``interlock.cli._notify``: ``--webhooks``, ``--deadlines``)."""
COMMAND_MODULES: list[str] = [
    "interlock.cli.demo",
    "interlock.cli._inbox",
    "interlock.cli._db",
    "interlock.cli._inbox_serve",
    "interlock.cli._notify",
    "interlock.cli._worker",
    "interlock.cli._a2a",
    "interlock.cli._mcp",
    "interlock.cli._agui",
]
"""Modules that register sub-commands; :func:`main` imports them first."""


def register(command: Command) -> Command:
    """Add (or replace) a sub-command."""
    COMMANDS[command.name] = command
    return command


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered sub-command."""
    from .. import __version__

    parser = argparse.ArgumentParser(prog="interlock", description="LLM agents that pause for people.")
    parser.add_argument("--version", action="version", version=f"interlock {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    logs = common.add_argument_group("logging")
    logs.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="least severe records shown")
    logs.add_argument(
        "--log-format", choices=["text", "json"], default="text", help="text lines or one JSON object each"
    )
    for command in COMMANDS.values():
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help, parents=[common])
        command.configure(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    command = COMMANDS.get(args.command or "")
    if command is None:
        parser.print_help(sys.stderr)
        return 2
    args.log_level = args.log_level or command.log_level
    configure_logging(args.log_level, args.log_format)
    try:
        return command.run(args)
    except CommandError as exc:
        print(f"interlock {command.name}: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:  # Ctrl-C: end the line the terminal shows "^C" on, and exit
        print(file=sys.stderr)
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


def as_app(target: object, *, base_path: str = "", protocols: Sequence[Any] = ()) -> Any:
    """An ASGI app for an agent, a list or dict of agents, or an app (returned as is).

    ``protocols`` (:class:`~interlock.http._mounts.ProtocolMount`) are served beside the Genkit
    routes of the agents; an app given as is cannot take them.
    """
    from ..agents._agent import Agent
    from ..http._server import AgentServer

    if isinstance(target, Agent):
        return AgentServer([target], base_path=base_path, protocols=protocols)
    if isinstance(target, AgentServer):
        if base_path:
            target.base_path = "/" + base_path.strip("/")
        if protocols:
            return AgentServer(target.agents, base_path=target.base_path, context=target.context, protocols=protocols)
        return target
    if is_asgi_app(target):
        if protocols:
            raise CommandError(
                f"cannot add {', '.join(p.name for p in protocols)} to {_describe(target)}: serve the agents "
                "(or an AgentServer), or mount the protocols in your own app"
            )
        return target
    agents = agents_of(target)
    if agents:
        return AgentServer(agents, base_path=base_path, protocols=protocols)
    raise CommandError(
        f"cannot serve {_describe(target)}: it is not an ASGI app. Serve an agent, a list or dict of agents, "
        "an AgentServer, or an ASGI app (an async callable taking scope, receive and send)"
    )


def is_asgi_app(target: object) -> bool:
    """Whether ``target`` is an ASGI 3 app: an async callable that takes ``(scope, receive, send)``."""
    if isinstance(target, type) or not callable(target):
        return False
    call: Any = target if inspect.isfunction(target) or inspect.ismethod(target) else type(target).__call__
    if not inspect.iscoroutinefunction(call):
        return False
    try:
        inspect.signature(target).bind(object(), object(), object())
    except (TypeError, ValueError):
        return False
    return True


def _describe(target: object) -> str:
    if inspect.isfunction(target) or inspect.ismethod(target):
        try:
            signature = str(inspect.signature(target))
        except (TypeError, ValueError):
            signature = "(...)"
        kind = "async function" if inspect.iscoroutinefunction(target) else "function"
        return f"the {kind} {target.__qualname__}{signature}"
    if isinstance(target, type):
        return f"the class {target.__qualname__}"
    return f"a {type(target).__qualname__} ({target!r:.60})"


def agents_of(target: object) -> dict[str, Any] | list[Any] | None:
    """The agents of a list or dict of agents (``None`` if ``target`` is not one)."""
    from ..agents._agent import Agent

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
    parser.add_argument("--port", type=whole(0, 65535), default=8000, help="port to bind (default 8000)")
    parser.add_argument("--base-path", default="", help="URL prefix of every agent route, e.g. /api")
    parser.add_argument(
        "--workers", type=whole(1, 1024), default=1, metavar="N", help="worker processes (each imports the target)"
    )
    parser.add_argument(
        "--timeout-keep-alive",
        type=seconds,
        default=5.0,
        metavar="S",
        help="close idle keep-alive connections after S s",
    )
    parser.add_argument(
        "--http",
        choices=["auto", "httptools", "h11"],
        default="auto",
        help="HTTP parser (auto: httptools if present)",
    )
    parser.add_argument(
        "--loop", choices=["auto", "uvloop", "asyncio"], default="auto", help="event loop (auto: uvloop if installed)"
    )
    parser.add_argument(
        "--access-log", action="store_true", help="also log uvicorn's line per HTTP request (the turn lines stay)"
    )
    for extension in SERVE_EXTENSIONS:
        extension.configure(parser)


_ARGS_ENV = "INTERLOCK_SERVE_ARGS"
"""How ``serve --workers N`` tells each worker process what to serve: the command line, as JSON."""


def worker_app() -> Any:
    """The app a ``serve --workers N`` worker process serves, from the command line in ``$INTERLOCK_SERVE_ARGS``."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    args = build_parser().parse_args(json.loads(os.environ[_ARGS_ENV]))
    return _app_for(args)


def _app_for(args: argparse.Namespace) -> Any:
    protocols = [mount for extension in SERVE_EXTENSIONS for mount in extension.mounts(args)]
    return as_app(load_target(args.target), base_path=args.base_path, protocols=protocols)


def _serve(args: argparse.Namespace) -> int:
    from ..http._server import AgentServer

    app = _app_for(args)  # refuse a bad target before forking workers
    agents = list(app.agents.values()) if isinstance(app, AgentServer) else []
    loops = [loop for extension in SERVE_EXTENSIONS for loop in extension.loops(args, agents)]
    return run_app(app, args, loops)


def run_app(app: Any, args: argparse.Namespace, loops: Sequence[ServeLoop] = ()) -> int:
    """Serve an ASGI app on uvicorn at ``args.host``/``args.port``, with ``loops`` beside it."""
    try:
        import uvicorn
    except ImportError:
        raise CommandError("serving needs uvicorn: pip install 'interlock[server]'", code=1) from None
    export_traces()
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "log_config": None,  # uvicorn's records go through the handler configure_logging installed (text or JSON)
        "lifespan": "auto",
        "timeout_keep_alive": getattr(args, "timeout_keep_alive", 5.0),
        "http": getattr(args, "http", "auto"),
        "loop": getattr(args, "loop", "auto"),
        "access_log": getattr(args, "access_log", False),  # off: a line per request costs ~0.2 ms of CPU
    }
    workers: int = getattr(args, "workers", 1)
    if workers > 1:  # workers import the app themselves, so uvicorn needs an import string
        if loops:
            raise CommandError("--webhooks and --deadlines run in one process: leave out --workers, or run them apart")
        os.environ[_ARGS_ENV] = json.dumps(args.argv)
        del options["log_config"]  # worker processes log through uvicorn's own configuration
        uvicorn.run(f"{__name__}:worker_app", factory=True, workers=workers, **options)
        return 0
    config = uvicorn.Config(app, **options)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it shut down on
        with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:  # uvloop when it is installed
            runner.run(_serve_with(uvicorn.Server(config), loops))
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


def export_traces() -> None:
    """Export OpenTelemetry traces as the ``OTEL_*`` variables say, when ``interlock[otel]`` is installed.

    For long-running commands (``serve``); see :func:`interlock.telemetry.configure_from_env`.
    """
    log = logging.getLogger("interlock.telemetry")
    try:
        outcome = configure_from_env()
    except ImportError as exc:
        if any(name.startswith("OTEL_EXPORTER_OTLP") for name in os.environ):
            log.warning("traces are not exported: %s", exc)
        return
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    log.info("OpenTelemetry: %s", outcome, extra={"otel_setup": outcome})


register(
    Command(
        name="serve",
        help="serve agents over Genkit's HTTP protocol",
        configure=_configure_serve,
        run=_serve,
        log_level="info",
    )
)
