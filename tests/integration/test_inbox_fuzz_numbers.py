"""Issue 25's acceptance: numbers and durations fuzzed into every inbox route and every numeric CLI option.

The inbox's routes are listed from the app itself, so a new route is fuzzed too (and one with a
path parameter this file does not know fails until it is taught). Unicode digits, huge numbers
and durations go into query strings, forms and bodies: no 5xx, no traceback, the store unchanged.
The command line's options are found by walking its parser: every numeric or duration option
reads through :mod:`interlock.cli._arguments`, and a bad value is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import pathlib
import sqlite3
from collections.abc import Iterator
from typing import Any, cast
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Mount, Route
from test_inbox_http_fuzz import Served

from interlock.cli import _arguments as arguments
from interlock.cli._main import COMMAND_MODULES, build_parser, main
from interlock.http._inbox import InboxApp
from interlock.http._inbox.service import DECISIONS
from interlock.inbox._inbox import Inbox
from interlock.stores.memory import InMemoryStore

pytestmark = pytest.mark.slow
FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

digits = st.text(st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=6)
specials = st.sampled_from(
    ["\u00b2", "\u0663", "\u07c0", "\u2460", "\U0001d7d8", "\u216b", "0", "007", "-1", "+1", "1e999", "nan", "inf"]
)
huge = st.integers(1, 6000).map(lambda n: "9" * n) | st.integers(2**63 - 2, 10**40).map(str)
durations = st.tuples(digits | huge | st.integers(0, 10**12).map(str), st.sampled_from("smhdwy")).map("".join)
numberish = digits | specials | huge | durations | st.lists(durations, min_size=2, max_size=3).map("".join)
value = numberish | st.text(max_size=12)
QUERY_KEYS = ["limit", "older_than", "newer_than", "cursor", "order", "in_doubt", "agent", "tool", "session"]
queries = st.dictionaries(st.sampled_from(["limit", "older_than", "newer_than"]), numberish, min_size=1, max_size=2) | (
    st.dictionaries(st.sampled_from([*QUERY_KEYS, "resume_token", "count"]), value, max_size=3)
)
decision = value.filter(lambda v: v not in DECISIONS)
bodies = st.fixed_dictionaries(
    {"decision": decision},
    optional={"payload": st.dictionaries(st.text(max_size=5), value), "ref": value, "tool": value},
) | st.fixed_dictionaries({"answers": st.lists(st.fixed_dictionaries({"decision": decision}), max_size=3)})
forms = st.dictionaries(st.sampled_from(["count", "a1.decision", "a1.ref", "a2.decision", "decision"]), value).map(
    lambda f: f | {"decision": f.get("decision", "") if f.get("decision") not in DECISIONS else "no"}
)


def routes() -> list[tuple[str, str]]:
    """Every (method, path) the inbox app serves, read from the app."""
    app = InboxApp(Inbox(InMemoryStore()), token="t")
    found: list[tuple[str, str]] = []
    for route in app.routes:
        if isinstance(route, Route):
            found += [(method, route.path) for method in sorted((route.methods or set()) - {"HEAD"})]
        elif isinstance(route, Mount):
            found.append(("GET", route.path + "/{path}"))
    return found


def dump(path: pathlib.Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("fuzz-numbers") / "inbox.db")
    s.thread.start()
    if not s.ready.wait(30):
        pytest.fail("the inbox did not start")
    yield s
    assert s.server is not None
    s.server.should_exit = True
    s.thread.join(30)


def _path(template: str, served: Served, which: int, fuzzed: str, real: bool) -> str:
    params = {
        "snapshot_id": served.ids[which] if real else fuzzed,
        "session_id": served.sessions[which] if real else fuzzed,
        "path": fuzzed,
    }
    path = template
    for name, given_value in params.items():
        path = path.replace("{" + name + "}", quote(given_value, safe="") or "x")
    assert "{" not in path, f"teach this fuzz the path parameters of {template}"
    return path


def _send(c: httpx.Client, method: str, path: str, query: dict[str, str], body: Any, form: dict[str, str]) -> None:
    options: dict[str, Any] = {"params": query}
    if method == "POST" and path.startswith("/api/"):
        options["json"] = body
    elif method == "POST":
        options["data"] = form | {"csrf": "x"}
    with c.stream(method, path, **options) as r:  # event streams: the status, then hang up
        text = r.read().decode("utf-8", "replace") if r.status_code >= 400 else ""
        assert r.status_code < 500, (method, str(r.request.url)[:300], r.status_code, text[:300])
        assert "Traceback" not in text


def test_every_route_is_fuzzed() -> None:
    assert {path for _, path in routes()} >= {"/api/interrupts", "/api/audit", "/", "/sign-out", "/events"}


@pytest.mark.parametrize("route", routes(), ids=" ".join)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries, body=bodies, form=forms, which=st.integers(0, 2), fuzzed=value, real=st.booleans())
def test_numbers_into_every_route_are_never_a_5xx_and_change_nothing(
    served: Served,
    route: tuple[str, str],
    query: dict[str, str],
    body: Any,
    form: dict[str, str],
    which: int,
    fuzzed: str,
    real: bool,
) -> None:
    before = dump(served.path)
    headers, cookies = {"x-user": "fuzzer"}, {"interlock_csrf": "x"}
    with httpx.Client(base_url=served.url, headers=headers, cookies=cookies, timeout=30) as c:
        _send(c, route[0], _path(route[1], served, which, fuzzed, real), query, body, form)
    assert dump(served.path) == before


# the command line ------------------------------------------------------------------------------

_READERS = arguments.__name__


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    yield [], parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
            choices = cast(dict[str, argparse.ArgumentParser], action.choices)  # pyright: ignore[reportUnknownMemberType]
            for name, sub in choices.items():
                yield from (([name, *path], p) for path, p in _subparsers(sub))


def numeric_options() -> list[tuple[list[str], str, list[str], Any]]:
    """Every (command path, option, other required arguments, reader) whose value is a number or a duration."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    found: list[tuple[list[str], str, list[str], Any]] = []
    for path, parser in _subparsers(build_parser()):
        actions = parser._actions
        required: list[str] = []
        for action in actions:
            if (
                not action.option_strings
                and action.nargs not in ("*", "?")
                and action.dest not in ("command", "action")
            ):
                required.append("x")
            elif action.required and action.option_strings and action.type is None:
                required += [action.option_strings[0], "x"]
        for action in actions:
            reader: Any = action.type
            if action.option_strings and (reader in (int, float) or getattr(reader, "__module__", "") == _READERS):
                found.append((path, action.option_strings[-1], required, reader))
    return found


def test_numeric_options_read_through_the_one_parser() -> None:
    options = numeric_options()
    assert {o[1] for o in options} >= {"--older-than", "--keep-last", "--port", "--workers", "--lease"}
    for path, option, _, reader in options:
        assert reader not in (int, float), f"{' '.join(path)} {option} reads with {reader}, not cli.arguments"


@FUZZ
@given(option=st.sampled_from(numeric_options()), text=value)
def test_numeric_options_refuse_bad_values_as_usage_errors(
    option: tuple[list[str], str, list[str], Any], text: str
) -> None:
    path, name, required, _ = option
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            parsed = build_parser().parse_args([*path, *required, f"{name}={text}"])
        except SystemExit as exit_:
            assert exit_.code == 2 and f"argument {name}" in err.getvalue(), err.getvalue()
            return
    read = getattr(parsed, name.lstrip("-").replace("-", "_"))
    assert isinstance(read, (int, float)) or read.total_seconds() <= 36500 * 86400


@FUZZ
@given(older=value, keep=value)
def test_inbox_list_and_a_dry_run_prune_never_crash(served: Served, older: str, keep: str) -> None:
    before = dump(served.path)
    out, err = io.StringIO(), io.StringIO()
    store = ["--store", str(served.path)]
    for argv in (
        ["inbox", "list", *store, f"--older-than={older}", f"--newer-than={keep}"],
        ["sessions", "prune", *store, "--dry-run", f"--keep-last={keep}", f"--older-than={older}"],
    ):
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exit_:
                code = exit_.code
        assert code in (0, 2), (argv, code, err.getvalue()[-500:])
    assert dump(served.path) == before
