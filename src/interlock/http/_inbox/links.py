"""Answer links: a URL of the inbox's page for one interrupt, carrying its resume token.

An emailed (or chat) approval link opens the interrupt's page; the token rides in its
forms and the answer spends it (:mod:`interlock.interrupts._tokens`), so the link answers at most once:
a second click finds the interrupt answered and says by whom. Opening the link changes
nothing; only the form's post answers, as the signed-in person.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from ...inbox._inbox import PendingInterrupt
from ...metadata import resume_token


def answer_url(base_url: str, item: PendingInterrupt) -> str:
    """The page of ``item`` under the inbox at ``base_url``, with its resume token when it has one."""
    url = f"{base_url.rstrip('/')}/interrupts/{quote(item.snapshot_id, safe='')}"
    token = resume_token(item.part)
    return url + (f"?{urlencode({'resume_token': token})}" if token else "")
