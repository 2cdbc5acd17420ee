"""The approval inbox over HTTP: a JSON API, a live web page, and its OpenAPI description.

::

    from interlock.inbox._inbox import Inbox
    from interlock.http._inbox import InboxApp

    app = InboxApp(Inbox(store, agents=[bank]), context=who_is_asking)  # the agent server's hook
    app = InboxApp(Inbox(store, agents=[bank]), token=secret, user="alice")  # one user

Needs the ``inbox`` extra (Starlette and Jinja2). See ``docs/inbox.md``.
"""

from __future__ import annotations

try:
    from .app import InboxApp as InboxApp
    from .app import mount_inbox as mount_inbox
    from .links import answer_url as answer_url
except ModuleNotFoundError as exc:
    if exc.name in ("starlette", "jinja2", "multipart"):
        raise ImportError(f"the inbox's web app needs {exc.name}: pip install 'interlock[inbox]'") from exc
    raise
