"""The quorum cases of ``unit/test_policy_quorum.py`` on a PostgreSQL store (votes kept in its rows)."""

from __future__ import annotations

import pytest
from policy_bank import RUNS
from test_policy_quorum import (
    test_a_deny_before_the_quorum_ends_the_call_without_the_tool,
    test_racing_voters_resume_exactly_once,
    test_the_requester_and_non_members_cannot_vote,
    test_two_approvals_resume_once_and_the_votes_are_kept,
)

__all__ = [
    "test_a_deny_before_the_quorum_ends_the_call_without_the_tool",
    "test_racing_voters_resume_exactly_once",
    "test_the_requester_and_non_members_cannot_vote",
    "test_two_approvals_resume_once_and_the_votes_are_kept",
]


@pytest.fixture(params=["postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    """The store the shared cases run on here (memory and SQLite: unit/test_policy_quorum.py)."""
    return request.param


@pytest.fixture(autouse=True)
def _runs() -> None:
    RUNS.clear()
