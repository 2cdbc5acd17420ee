"""Issue 25, defect 3: bad numbers and durations to the inbox and its CLI are INVALID_ARGUMENT, never a 500.

``str.isdigit()`` is true for ``²``, ``int()`` refuses 5,000 digits, and ``timedelta`` overflows:
each of these reached a route as an internal error with a traceback. Every route now reads
numbers and durations with :mod:`interlock._durations`: 400 naming the parameter, nothing changed.
"""

from __future__ import annotations

import pathlib
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from http_helpers import serve
from inbox_apps import build_app

import interlock.cli._inbox  # noqa: F401  # pyright: ignore[reportUnusedImport]  (registers the commands)
from interlock import _durations as durations
from interlock.cli import main
from interlock.errors import InvalidArgumentError
from interlock.stores.sqlite import SQLiteStore

SUPERSCRIPT, ARABIC, NKO = "\u00b2", "\u0663", "\u07c0"
HUGE = "9" * 5000
LISTING = ["/api/interrupts", "/", "/fragments/pending", "/events"]
AUDITS = ["/api/audit", "/api/sessions/{session}/audit"]
BAD_LISTING = [
    ("limit", SUPERSCRIPT),
    ("limit", HUGE),
    ("limit", ARABIC),
    ("older_than", "9" * 30),
    ("older_than", "9999999999w"),
    ("newer_than", "99999999999d"),
    ("newer_than", f"{NKO}s"),
]
BAD_LIMITS = [SUPERSCRIPT, HUGE, ARABIC]


def dump(path: pathlib.Path) -> list[str]:
    """Everything the SQLite store holds, as SQL."""
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


@dataclass
class Inbox:
    url: str
    path: pathlib.Path
    snapshot_id: str
    session_id: str


@pytest.fixture
async def inbox(tmp_path: pathlib.Path) -> AsyncIterator[Inbox]:
    path = tmp_path / "inbox.db"
    async with SQLiteStore(path) as store:
        app, agents = build_app(store)
        out = await agents[0].run("pay bob 5")
        async with serve(app) as url:
            yield Inbox(url, path, out.snapshot_id or "", out.session_id or "")


def _refused(r: httpx.Response, name: str) -> None:
    assert r.status_code == 400, (str(r.request.url)[:200], r.status_code, r.text[:300])
    text = r.json()["message"] if r.headers["content-type"].startswith("application/json") else r.text
    assert name in text and ("whole number" in text or "duration" in text), text[:300]
    if r.headers["content-type"].startswith("application/json"):
        assert r.json()["status"] == "INVALID_ARGUMENT"
    assert len(r.text) < 5000  # the refused value is not echoed back in full


@pytest.mark.parametrize("route", LISTING)
@pytest.mark.parametrize(("name", "value"), BAD_LISTING, ids=lambda v: v[:12] if isinstance(v, str) else v)
async def test_listing_routes_refuse_bad_numbers_and_durations(inbox: Inbox, route: str, name: str, value: str) -> None:
    before = dump(inbox.path)
    async with httpx.AsyncClient(base_url=inbox.url, headers={"x-user": "ann"}, timeout=10) as c:
        r = await c.get(route, params={name: value})
    _refused(r, name)
    assert dump(inbox.path) == before


@pytest.mark.parametrize("route", AUDITS)
@pytest.mark.parametrize("value", BAD_LIMITS, ids=["superscript", "5000-digits", "arabic-indic"])
async def test_audit_routes_refuse_bad_limits(inbox: Inbox, route: str, value: str) -> None:
    async with httpx.AsyncClient(base_url=inbox.url, headers={"x-user": "ann"}, timeout=10) as c:
        r = await c.get(route.format(session=inbox.session_id), params={"limit": value})
    _refused(r, "limit")


@pytest.mark.parametrize("count", [SUPERSCRIPT, HUGE, ARABIC, "0", "101"])
async def test_a_form_with_a_bad_count_is_refused(inbox: Inbox, count: str) -> None:
    before = dump(inbox.path)
    async with httpx.AsyncClient(base_url=inbox.url, headers={"x-user": "ann"}, timeout=10) as c:
        c.cookies.set("interlock_csrf", "x")
        form = {"csrf": "x", "count": count, "a1.decision": "approve", "a1.ref": "t1"}
        r = await c.post(f"/interrupts/{inbox.snapshot_id}/answer", data=form)
    _refused(r, "count")
    assert dump(inbox.path) == before


async def test_good_numbers_and_durations_still_work(inbox: Inbox) -> None:
    async with httpx.AsyncClient(base_url=inbox.url, headers={"x-user": "ann"}, timeout=10) as c:
        for params, found in (
            ({"limit": "500", "older_than": "0"}, 1),
            ({"newer_than": "1h30m"}, 1),
            ({"older_than": "36500d"}, 0),
            ({"limit": "007", "older_than": "0.0s"}, 1),
        ):
            r = await c.get("/api/interrupts", params=params)
            assert r.status_code == 200 and len(r.json()["items"]) == found, (params, r.text)
        assert (await c.get("/api/audit", params={"limit": "1000"})).status_code == 200


# the one parser ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [SUPERSCRIPT, ARABIC, NKO, "", " 1", "1 ", "+1", "-1", "0x10", "1_000", "1.0", HUGE])
def test_parse_whole_takes_ascii_digits_only(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="limit must be a whole number from 1 to 10"):
        durations.parse_whole(text, "limit", low=1, high=10)


@pytest.mark.parametrize(
    "text", ["9" * 30, "9999999999w", "99999999999d", "36501d", f"1{SUPERSCRIPT}s", f"{ARABIC}m", "1e9s", "inf", "1h-"]
)
def test_parse_duration_is_bounded_and_ascii(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="older_than must be a duration like 90s"):
        durations.parse_duration(text, "older_than")


def test_parse_duration_reads_units_sums_and_seconds() -> None:
    read = durations.parse_duration
    assert read("90") == read("90s") == read("1m30s")
    assert read("1.5h").total_seconds() == 5400
    assert read("36500d") == durations.MAX_DURATION


# the command line ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("inbox", "list", "--older-than", "9999999999w"),
        ("inbox", "list", "--newer-than", "99999999999d"),
        ("inbox", "list", "--older-than", f"{ARABIC}m"),
        ("sessions", "prune", "--older-than", "9" * 30 + "d"),
        ("sessions", "prune", "--keep-last", "9" * 30),
        ("sessions", "prune", "--keep-last", SUPERSCRIPT),
    ],
    ids=["older-overflow", "newer-overflow", "arabic", "prune-overflow", "keep-last-huge", "keep-last-superscript"],
)
def test_the_cli_refuses_bad_numbers_as_usage_errors(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--store", str(tmp_path / "none.db")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {args[2]}: the value must be" in err and "Traceback" not in err, err
