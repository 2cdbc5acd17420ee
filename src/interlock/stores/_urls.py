"""Opening stores by URL: ``open_store("sqlite:///sessions.db")``, ``--store URL`` on the command line.

A plain path or ``sqlite:///path`` is a :class:`~interlock.stores.sqlite.SQLiteStore`; a store
module registers its own scheme with :func:`register_store_scheme` (``postgresql://`` is
imported on first use).
"""

from __future__ import annotations

import importlib
import os
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

from ..errors import InvalidArgumentError, UnimplementedError

if TYPE_CHECKING:
    from . import SessionStore


class StoreOpener(Protocol):
    """Opens the store a URL names, as an async context manager that closes it (``upgrade``: migrate on open)."""

    def __call__(self, url: str, *, upgrade: bool = False) -> AbstractAsyncContextManager[SessionStore]: ...


_OPENERS: dict[str, StoreOpener] = {}
_PLUGINS = {"postgres": "interlock.stores.postgres", "postgresql": "interlock.stores.postgres"}


def register_store_scheme(scheme: str, opener: StoreOpener) -> None:
    """Make :func:`open_store` open ``scheme://...`` URLs with ``opener`` (a store module calls this)."""
    _OPENERS[scheme.lower()] = opener


def open_store(
    url: str, *, must_exist: bool = False, upgrade: bool = False
) -> AbstractAsyncContextManager[SessionStore]:
    """Open the store a URL names, as an async context manager that closes it.

    A plain path or ``sqlite:///path`` opens a :class:`~interlock.stores.sqlite.SQLiteStore`
    (``must_exist`` refuses a file that is not there instead of creating it);
    ``postgresql://...`` a :class:`~interlock.stores.postgres.PostgresStore` (``interlock[postgres]``);
    other schemes must have been registered with :func:`register_store_scheme`. ``upgrade``
    applies the store's forward schema migrations on open (``interlock db upgrade``); without
    it a store of an older schema is refused with ``FAILED_PRECONDITION``.

    Raises:
        InvalidArgumentError: an unknown scheme, or a missing SQLite file with ``must_exist``.
        UnimplementedError: a known scheme whose store is not installed.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() == "sqlite":
        from .sqlite import SQLiteStore

        if sep and not rest.startswith("/"):
            raise InvalidArgumentError(
                f"expected sqlite:///<path> (sqlite:////<path> for an absolute one), got {url!r}"
            )
        path = rest[1:].split("?", 1)[0] if sep else url
        if must_exist and path != ":memory:" and not os.path.exists(path):
            raise InvalidArgumentError(f"there is no SQLite store at {path!r}")
        return SQLiteStore.from_url(url, upgrade=upgrade)
    key = scheme.lower()
    if key not in _OPENERS and key in _PLUGINS:
        try:
            importlib.import_module(_PLUGINS[key])
        except ModuleNotFoundError as exc:
            if exc.name == _PLUGINS[key]:
                raise UnimplementedError(f"{scheme}:// stores are not available in this version of interlock") from None
            raise UnimplementedError(f"{scheme}:// stores need {exc.name}: pip install 'interlock[postgres]'") from None
    opener = _OPENERS.get(key)
    if opener is None:
        known = ", ".join(["sqlite", *sorted(_OPENERS)])
        raise InvalidArgumentError(f"unknown store URL scheme {scheme!r} in {url!r} (known: {known}, or a plain path)")
    return opener(url, upgrade=upgrade)
