"""The approval inbox over HTTP: a JSON API, a live web page, and its OpenAPI description.

::

    from interlock.inbox._inbox import Inbox
    from interlock.http._inbox import InboxApp

    app = InboxApp(Inbox(store, agents=[bank]), context=who_is_asking)  # the agent server's hook
    app = InboxApp(Inbox(store, agents=[bank]), token=secret, user="alice")  # one user

Needs the ``inbox`` extra (Starlette and Jinja2), loaded on first use of these names: the
framework-free modules (``forms``, ``service``) import without it. See ``docs/inbox.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import InboxApp as InboxApp
    from .app import mount_inbox as mount_inbox
    from .links import answer_url as answer_url

_LAZY = {"InboxApp": ".app", "mount_inbox": ".app", "answer_url": ".links"}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(where, __name__), name)
    except ModuleNotFoundError as exc:
        if exc.name in ("starlette", "jinja2", "multipart"):
            raise ImportError(f"the inbox's web app needs {exc.name}: pip install 'interlock[inbox]'") from exc
        raise
    globals()[name] = value
    return value
