"""The named changes of snapshot state (:mod:`interlock.records.snapshots`), as pure functions on rows.

Each change is an updater: given the stored row (or ``None``), the row to write, ``None``
(write nothing) or a raised refusal. These tests apply them to plain :class:`Snapshot` values,
no store involved; the stores' own rules (versions, terminal statuses) are the conformance
suite's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from interlock._engine import commit as claims
from interlock.errors import ClaimConflictError, PermissionDeniedError, SnapshotNotFoundError
from interlock.metadata import CONSUMED_TOKENS, ESCALATED, HANDOFF, RECLAIMED_FROM, REQUEUED
from interlock.records import snapshots as rows
from interlock.records._sessions import EXPIRY, ErrorInfo, SessionState, Snapshot, utcnow
from interlock.records.snapshots import NoChange, claim_state

HOUR = timedelta(hours=1)


def paused(**changes: Any) -> Snapshot:
    """An interrupted snapshot, unclaimed unless ``changes`` say otherwise."""
    return Snapshot(snapshot_id="p", session_id="s", finish_reason="interrupted").evolve(**changes)


def held(by: str, **changes: Any) -> Snapshot:
    return paused(claimed_by=by, claim_expires_at=utcnow() + HOUR, **changes)


def lapsed(by: str, **changes: Any) -> Snapshot:
    return paused(claimed_by=by, claim_expires_at=utcnow() - HOUR, **changes)


def answered(by: str, **changes: Any) -> Snapshot:
    return paused(claimed_by=by, claim_expires_at=None, **changes)


def pending(**changes: Any) -> Snapshot:
    return Snapshot(snapshot_id="d", session_id="s", status="pending", heartbeat_at=utcnow()).evolve(**changes)


def written(update: rows.Update, cur: Snapshot | None) -> Snapshot:
    new = update(cur)
    assert new is not None
    return new


# claims ------------------------------------------------------------------------------------


def test_the_claim_rules_are_reexported_where_they_were() -> None:
    assert claims.claim_state is rows.claim_state and claims.is_answerable is rows.is_answerable
    assert claims.consumed_tokens is rows.consumed_tokens and claims.refuse_spent is rows.refuse_spent
    assert claims.conflict is rows.conflict


def test_a_free_claim_is_taken_for_ttl_seconds() -> None:
    before = utcnow()
    new = written(rows.take_claim("t1", ttl=30), paused())
    assert new.claimed_by == "t1" and claim_state(new) == "held"
    assert new.claim_expires_at is not None and new.claim_expires_at >= before + timedelta(seconds=30)
    assert RECLAIMED_FROM not in (new.metadata or {})


@pytest.mark.parametrize(("row", "words"), [(held("t0"), "is being resumed"), (answered("t0"), "already resumed")])
def test_a_claim_held_or_answered_by_another_turn_is_refused_naming_it(row: Snapshot, words: str) -> None:
    with pytest.raises(ClaimConflictError, match=words) as caught:
        rows.take_claim("t1", ttl=30)(row)
    assert caught.value.winner == "t0"


def test_a_spent_tokens_resume_is_told_who_answered_before_it_is_told_the_token_was_spent() -> None:
    row = answered("t0", metadata={CONSUMED_TOKENS: ["n1"]})
    with pytest.raises(ClaimConflictError) as caught:
        rows.take_claim("t1", ttl=30, nonces=["n1"])(row)
    assert caught.value.winner == "t0"


def test_a_spent_token_nobody_answered_with_is_refused_as_replayed() -> None:
    with pytest.raises(PermissionDeniedError) as caught:
        rows.take_claim("t1", ttl=30, nonces=["n1"])(paused(metadata={CONSUMED_TOKENS: ["n1"]}))
    assert caught.value.details == {"reason": "replayed"}


def test_a_lapsed_claim_is_named_and_then_taken_over_only_when_stolen() -> None:
    take = rows.take_claim("t1", ttl=30)
    assert take(lapsed("t0")) is None and take.lapsed == "t0"
    new = written(rows.take_claim("t1", ttl=30, steal="t0"), lapsed("t0"))
    assert new.claimed_by == "t1" and (new.metadata or {})[RECLAIMED_FROM] == "t0"
    assert written(rows.take_claim("t1", ttl=30), lapsed("t1")).claimed_by == "t1"  # its own: retaken


def test_a_missing_row_cannot_be_claimed() -> None:
    with pytest.raises(SnapshotNotFoundError):
        rows.take_claim("t1", ttl=30)(None)


def test_a_held_claim_is_refreshed_and_a_lost_one_refused_as_lapsed() -> None:
    row = paused(claimed_by="t1", claim_expires_at=utcnow() + timedelta(seconds=1))
    new = written(rows.refresh_claim("p", "t1", 3600), row)
    assert new.claim_expires_at is not None and row.claim_expires_at is not None
    assert new.claim_expires_at > row.claim_expires_at
    for lost in (lapsed("t1"), held("t2"), answered("t2"), None):
        with pytest.raises(ClaimConflictError, match="lapsed"):
            rows.refresh_claim("p", "t1", 30)(lost)


def test_an_answer_marks_the_claim_answered_and_spends_the_tokens() -> None:
    new = written(rows.answer_claim("p", "t1", ["n2"]), held("t1", metadata={CONSUMED_TOKENS: ["n1"], "k": 1}))
    assert claim_state(new) == "answered" and new.claimed_by == "t1"
    assert new.metadata == {CONSUMED_TOKENS: ["n1", "n2"], "k": 1}
    assert written(rows.answer_claim("p", "t1"), held("t1")).metadata is None


def test_an_answer_is_refused_once_the_claim_is_lost_or_the_row_gone() -> None:
    for lost in (lapsed("t1"), held("t2"), answered("t2")):
        with pytest.raises(ClaimConflictError):
            rows.answer_claim("p", "t1")(lost)
    with pytest.raises(SnapshotNotFoundError, match="deleted while turn t1 ran"):
        rows.answer_claim("p", "t1")(None)


def test_a_claim_on_the_written_row_is_answered_then_cleared() -> None:
    done = rows.settle_claimed(rows.answer_claim("d", "w1"), rows.abort_pending())
    new = written(done, pending(claimed_by="w1", claim_expires_at=utcnow() + HOUR))
    assert new.status == "aborted" and new.claimed_by is None and new.claim_expires_at is None
    with pytest.raises(SnapshotNotFoundError):
        done(None)
    with pytest.raises(ClaimConflictError):
        done(pending(claimed_by="w2", claim_expires_at=utcnow() + HOUR))
    assert rows.settle_claimed(rows.answer_claim("d", "w1"), lambda _: None)(held("w1")) is None


def test_only_the_holders_unanswered_claim_is_released() -> None:
    new = written(rows.release_claim("t1"), held("t1"))
    assert claim_state(new) == "free" and new.claim_expires_at is None
    for kept in (answered("t1"), held("t2"), paused(), None):
        assert rows.release_claim("t1")(kept) is None


# rows --------------------------------------------------------------------------------------


def test_a_row_is_put_whatever_is_stored() -> None:
    row = pending()
    assert rows.put_row(row)(None) is row and rows.put_row(row)(paused()) is row


def test_a_heartbeat_refreshes_only_a_pending_row_and_only_an_old_beat() -> None:
    old = pending(heartbeat_at=utcnow() - HOUR)
    beat = written(rows.heartbeat(), old).heartbeat_at
    assert beat is not None and old.heartbeat_at is not None and beat > old.heartbeat_at
    assert rows.heartbeat(older_than=2 * HOUR)(old) is None
    assert written(rows.heartbeat(older_than=timedelta(minutes=1)), old).heartbeat_at != old.heartbeat_at
    assert rows.heartbeat()(paused()) is None and rows.heartbeat()(None) is None


def test_a_pending_row_fails_and_any_other_is_kept() -> None:
    error = ErrorInfo(status="UNAVAILABLE", message="gone")
    new = written(rows.fail_pending(error), pending())
    assert (new.status, new.finish_reason, new.error, new.heartbeat_at) == ("failed", "failed", error, None)
    assert rows.fail_pending(error)(paused()) is None and rows.fail_pending(error)(None) is None
    taken = written(rows.fail_taken_over("t9"), pending())
    assert taken.error == ErrorInfo(status="ABORTED", message="its claim lapsed and turn t9 took the interrupt over")


def test_only_a_pending_row_is_aborted() -> None:
    assert written(rows.abort_pending(), pending()).status == "aborted"
    for kept in (paused(), pending(status="failed"), None):
        assert rows.abort_pending()(kept) is None


def test_a_detached_runs_outcome_finalizes_its_pending_row_without_the_handoff() -> None:
    state = SessionState(session_id="s")
    row = pending(metadata={HANDOFF: {"input": {}}, "agent": "bank"})
    done = written(rows.finalize(state=state, error=None, finish="stop", traced={"traceContext": {}}), row)
    assert (done.status, done.finish_reason, done.error, done.heartbeat_at) == ("completed", "stop", None, None)
    assert done.state is state and done.metadata == {"agent": "bank", "traceContext": {}}
    error = ErrorInfo(status="INTERNAL", message="boom")
    failed = written(rows.finalize(state=state, error=error, finish="failed", traced={}), row)
    assert (failed.status, failed.error) == ("failed", error)
    for gone in (pending(status="aborted"), None):
        with pytest.raises(NoChange):
            rows.finalize(state=state, error=None, finish="stop", traced={})(gone)


def test_an_orphaned_handoff_is_requeued_and_counted_while_it_is_one() -> None:
    orphan = pending(heartbeat_at=utcnow() - EXPIRY - HOUR, metadata={HANDOFF: {}})
    assert rows.is_orphaned(orphan) and rows.requeues(orphan) == 0
    once = written(rows.if_orphaned(rows.requeue()), orphan)
    assert rows.requeues(once) == 1 and (once.metadata or {})[REQUEUED] == 1 and not rows.is_orphaned(once)
    for alive in (
        once,
        orphan.evolve(metadata={}),
        orphan.evolve(claimed_by="w1", claim_expires_at=utcnow() + HOUR),
        orphan.evolve(status="completed"),
        None,
    ):
        with pytest.raises(NoChange):
            rows.if_orphaned(rows.requeue())(alive)
    assert rows.is_orphaned(orphan.evolve(claimed_by="w1", claim_expires_at=utcnow() - HOUR))


def test_an_escalation_is_marked_once_on_an_answerable_row() -> None:
    mark = {"at": "2026-01-01T00:00:00+00:00", "group": "ops", "by": "sweeper"}
    row = paused(metadata={ESCALATED: {"other#1": {}}, "agent": "bank"})
    new = written(rows.mark_escalated("pay#1", mark), row)
    assert new.metadata == {ESCALATED: {"other#1": {}, "pay#1": mark}, "agent": "bank"}
    assert written(rows.mark_escalated("pay#1", mark), lapsed("t0")).metadata == {ESCALATED: {"pay#1": mark}}
    with pytest.raises(NoChange, match="already escalated"):
        rows.mark_escalated("pay#1", mark)(new)
    for taken in (held("t0"), answered("t0"), None):
        with pytest.raises(NoChange, match="answered meanwhile"):
            rows.mark_escalated("pay#1", mark)(taken)


def test_a_nonce_is_spent_once_on_its_own_row() -> None:
    first = written(rows.spend_nonce("n1", session_id="s", agent="bank"), None)
    assert (first.snapshot_id, first.session_id, first.metadata) == (
        "n1",
        "s",
        {"agent": "bank", CONSUMED_TOKENS: ["n1"]},
    )
    with pytest.raises(PermissionDeniedError):
        rows.spend_nonce("n1", session_id="s", agent="bank")(first)
    other = written(rows.spend_nonce("n2", session_id="s", agent="bank"), first)
    assert rows.consumed_tokens(other) == ["n1", "n2"]
