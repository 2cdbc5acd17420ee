"""A store connection's lasting state, and how its round trips wait on the event loop.

:class:`Link` is what the store keeps of one psycopg connection for as long as the connection
lives: the statements prepared on it, the loader its answers are read with, and its socket's
place on the event loop. :meth:`Link.wait` drives libpq's (compiled) generators until a
batch's answers are in, waiting for the socket alone: no timer and no cancel request as
psycopg's own wait adds (:meth:`~._wire.Wire.flush` closes a connection interrupted
mid-exchange instead).

Watching a socket costs the event loop a handle and system calls each time it starts and
stops. While the store holds a connection (:attr:`Link.held`: checked out, or idle in the
store's own list, :mod:`._plumbing`), the socket stays watched between round trips. What the
server writes while nobody waits is read at once: a notice stays in libpq's buffer, and the
connection's end (the server closed an idle connection) marks it broken and stops the watch,
so the store hands that connection back to the pool, which drops it, instead of using it.
Before psycopg itself waits on the connection (a save's ``then=`` steps, the pool's reset or
close) the store calls :meth:`Link.lend`, which stops the watch: psycopg's wait would replace
it, and its end remove it.
"""

from __future__ import annotations

from asyncio import AbstractEventLoop, Future, get_running_loop
from time import monotonic
from typing import Any

from psycopg import AsyncConnection, errors, pq
from psycopg.adapt import Transformer
from psycopg.waiting import Ready
from psycopg_pool import AsyncConnectionPool

_READ, _WRITE = int(Ready.R), int(Ready.W)
_IDLE = pq.TransactionStatus.IDLE
_OK = pq.ConnStatus.OK


class Link:
    """What the store keeps of one connection (see the module)."""

    __slots__ = ("con", "prepared", "loader", "held", "expires", "_loop", "_fd", "_watching", "_waiter")

    def __init__(self, con: AsyncConnection[Any]) -> None:
        self.con = con
        self.prepared: set[bytes] = set()
        """The names of the statements prepared on the connection."""
        self.loader = Transformer(con)
        """Loads the rows of the connection's answers (one at a time, as a cursor's does)."""
        self.held = False
        """The store holds the connection (its socket may stay watched between round trips)."""
        self.expires = 0.0
        """When (``time.monotonic()``) the store gives the connection back to its pool for good."""
        self._loop: AbstractEventLoop | None = None
        self._fd = -1
        self._watching = False
        self._waiter: Future[int] | None = None

    async def wait(self, gen: Any) -> Any:
        """Drive the libpq generator ``gen`` until it returns its value, waiting on the event loop when it must."""
        try:
            wanted = next(gen)
            while True:
                wanted = gen.send(await self._ready(wanted))
        except StopIteration as done:
            return done.value
        except OSError as exc:
            raise errors.OperationalError("connection socket closed") from exc
        finally:
            if not self.held:
                self.lend()

    async def _ready(self, wanted: int) -> int:
        """Wait until the socket is ready for what ``wanted`` asks (reading, writing or both); say which it is."""
        if not self._watching:
            self._loop = get_running_loop()
            self._fd = self.con.pgconn.socket
            self._loop.add_reader(self._fd, self._readable)
            self._watching = True
        loop = self._loop
        assert loop is not None
        waiter = self._waiter = loop.create_future()
        writing = wanted & _WRITE
        if writing:  # libpq's buffer is full (a large batch): rare, so not kept
            loop.add_writer(self._fd, _wake, waiter, _WRITE)
        try:
            return await waiter
        finally:
            self._waiter = None
            if writing:
                loop.remove_writer(self._fd)

    def _readable(self) -> None:
        waiter = self._waiter
        if waiter is None:  # nobody waits: the server wrote to an idle connection (a notice, or its end)
            pg = self.con.pgconn
            try:  # read it: at the connection's end libpq marks it broken (then take() passes it over)
                pg.consume_input()
            except errors.OperationalError:
                pass
            if pg.status != _OK:  # stop watching until the next round trip (if any)
                self.lend()
        elif not waiter.done():
            waiter.set_result(_READ)

    def lend(self) -> None:
        """Stop watching the socket: psycopg is about to wait on it, or the connection to close."""
        if self._watching and self._loop is not None:
            self._watching = False
            if not self._loop.is_closed():
                self._loop.remove_reader(self._fd)


def _wake(waiter: Future[int], what: int) -> None:
    if not waiter.done():
        waiter.set_result(what)


def link_of(con: AsyncConnection[Any]) -> Link:
    """The connection's :class:`Link`, made on its first use and kept on the connection (so it lives as long)."""
    link: Link | None = getattr(con, _ATTRIBUTE, None)
    if link is None:
        link = Link(con)
        setattr(con, _ATTRIBUTE, link)
    return link


_ATTRIBUTE = "_interlock_link"


class Links:
    """The store's connections: its pool, in front of which the store keeps the ones it holds idle.

    :meth:`take` hands out an idle connection the store holds (the last given back first: its
    socket watched, its statements prepared; one the server closed meanwhile goes back to the
    pool, which drops it), else one from the pool; :meth:`give` keeps a
    connection given back idle (no transaction open, nothing broken), unless a caller waits
    for the pool (then the pool hands it on), the connection is past the pool's
    ``max_lifetime`` since the store took it, or the store is closing: then it goes back to
    the pool, which rolls back, drops a broken connection or closes an old one. The store is
    the pool's only user, so a caller waiting for the pool is one of :meth:`take`'s.
    """

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool
        self.idle: list[Link] = []
        self.waiting = 0
        self.closed = False

    async def take(self) -> Link:
        while self.idle:
            link = self.idle.pop()
            if link.con.pgconn.status == _OK:
                return link
            await self._return(link)  # the server closed it while it was idle: the pool drops it
        self.waiting += 1
        try:
            con = await self.pool.getconn()
        finally:
            self.waiting -= 1
        link = link_of(con)
        link.held = True
        link.expires = monotonic() + self.pool.max_lifetime
        return link

    async def give(self, link: Link) -> None:
        pg = link.con.pgconn
        if not self.waiting and not self.closed and pg.transaction_status == _IDLE and link.expires > monotonic():
            self.idle.append(link)
            return
        await self._return(link)

    async def _return(self, link: Link) -> None:
        link.held = False
        link.lend()
        await self.pool.putconn(link.con)

    async def close(self) -> None:
        """Give the idle connections back to the pool, and every other one once it is given back."""
        self.closed = True
        idle, self.idle = self.idle, []
        for link in idle:
            await self.give(link)
