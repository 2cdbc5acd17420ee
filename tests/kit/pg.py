"""PostgreSQL for the tests: one throwaway cluster per pytest session (scripts/postgres.sh), one schema per store.

The cluster starts on first use (so a session without PostgreSQL tests does not start one);
``tests/conftest.py`` stops it when the session ends. A failure to install or start it
fails the test that needed it: nothing is skipped.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import tempfile
from urllib.parse import quote

import psycopg
from psycopg import sql
from where import ROOT

SCRIPT = ROOT / "scripts" / "postgres.sh"
ENV = "INTERLOCK_TEST_PG_DSN"
_counter = itertools.count()


def start_cluster() -> tuple[str, str]:
    """Start a cluster with the project's script: ``(dsn, directory)``; raises if it cannot."""
    directory = tempfile.mkdtemp(prefix="interlock-pg-")
    done = subprocess.run(["bash", str(SCRIPT), "start", directory], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/postgres.sh start failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1], directory


def stop_cluster(directory: str) -> None:
    subprocess.run(["bash", str(SCRIPT), "stop", directory], capture_output=True, timeout=120, check=False)


_started: list[str] = []
"""The directory of the cluster this process started, if it did."""


def cluster_dsn() -> str:
    """The session's cluster: ``$INTERLOCK_TEST_PG_DSN``, or one started now (and exported, for worker processes)."""
    found = os.environ.get(ENV)
    if found:
        return found
    dsn, directory = start_cluster()
    _started.append(directory)
    os.environ[ENV] = dsn
    return dsn


def stop_started() -> None:
    """Stop the cluster :func:`cluster_dsn` started, if any (at the end of the pytest session)."""
    while _started:
        os.environ.pop(ENV, None)
        stop_cluster(_started.pop())


def fresh_dsn(base: str | None = None) -> str:
    """A ``postgresql://`` URL whose ``search_path`` is a new, empty schema of the session's cluster: a fresh store."""
    base = base or cluster_dsn()
    name = f"t{os.getpid()}_{next(_counter)}"
    with psycopg.connect(base, autocommit=True) as con:
        con.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-c search_path={name}')}"
