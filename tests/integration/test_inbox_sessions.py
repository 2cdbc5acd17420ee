"""Issue 25: the inbox's sign-in cookie is one sign-in's (random id, issue time, signed), expires, and signs out."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from http_helpers import serve
from inbox_apps import build_agents

from interlock.errors import UsageError
from interlock.http._inbox import InboxApp
from interlock.inbox._inbox import Inbox
from interlock.stores.sqlite import SQLiteStore

TOKEN = "s3cret-token"


@dataclass
class Served:
    app: InboxApp
    url: str


@pytest.fixture
async def served(tmp_path: pathlib.Path) -> AsyncIterator[Served]:
    async with SQLiteStore(tmp_path / "s.db") as store:
        app = InboxApp(Inbox(store, agents=build_agents(store)), token=TOKEN, user="lead")  # signed in for 12 h
        async with serve(app) as url:
            yield Served(app, url)


async def sign_in(url: str) -> str:
    async with httpx.AsyncClient(base_url=url) as c:
        r = await c.get(f"/?key={TOKEN}")
        assert r.status_code == 303, r.text
        assert "max-age=43200" in r.headers["set-cookie"].lower()
        return r.cookies["interlock_inbox"]


async def status_with(url: str, cookie: str) -> int:
    async with httpx.AsyncClient(base_url=url, cookies={"interlock_inbox": cookie}) as c:
        return (await c.get("/api/interrupts")).status_code


async def test_each_sign_in_gets_its_own_cookie(served: Served) -> None:
    first, second = await sign_in(served.url), await sign_in(served.url)
    assert first != second
    assert await status_with(served.url, first) == 200 and await status_with(served.url, second) == 200


async def test_a_cookie_older_than_the_maximum_age_is_refused(served: Served) -> None:
    cookie = await sign_in(served.url)
    now = served.app.auth.clock()
    served.app.auth.clock = lambda: now + 12 * 3600 - 1
    assert await status_with(served.url, cookie) == 200
    served.app.auth.clock = lambda: now + 12 * 3600 + 1
    assert await status_with(served.url, cookie) == 401


async def test_a_tampered_or_foreign_cookie_is_refused(served: Served) -> None:
    cookie = await sign_in(served.url)
    sign_in_id, _, signature = cookie.partition(".")
    version, kid, issued, mac = signature.split(".")
    later = f"{sign_in_id}.{version}.{kid}.{int(issued) + 7200}.{mac}"  # a fresher issue time, same MAC
    other = InboxApp(served.app.inbox, token="another-token").auth.session_cookie("another-token") or ""
    for forged in (later, f"x{cookie}", cookie[:-2], other, "", "...."):
        assert await status_with(served.url, forged) == 401, forged


async def test_sign_out_clears_the_cookie_and_refuses_it_from_then_on(served: Served) -> None:
    cookie, kept = await sign_in(served.url), await sign_in(served.url)
    async with httpx.AsyncClient(base_url=served.url, cookies={"interlock_inbox": cookie}) as c:
        page = await c.get("/")
        assert page.status_code == 200 and 'action="/sign-out"' in page.text
        cross = await c.post("/sign-out", headers={"origin": "https://evil.example"})
        assert cross.status_code == 403
        out = await c.post("/sign-out")
    assert out.status_code == 303 and out.headers["location"] == "/"
    cleared = out.headers["set-cookie"].lower()
    assert cleared.startswith('interlock_inbox="";') or cleared.startswith("interlock_inbox=;"), cleared
    assert "max-age=0" in cleared
    assert await status_with(served.url, cookie) == 401  # the signed-out value, sent again
    assert await status_with(served.url, kept) == 200  # another sign-in stays


def test_the_maximum_age_is_set_and_positive(tmp_path: pathlib.Path) -> None:
    store = SQLiteStore(tmp_path / "x.db")
    assert InboxApp(Inbox(store), token=TOKEN, session_max_age=600).auth.session_max_age == 600
    with pytest.raises(UsageError, match="session_max_age"):
        InboxApp(Inbox(store), token=TOKEN, session_max_age=0)
