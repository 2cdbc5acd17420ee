"""Errors: canonical statuses, HTTP mapping, builtin bases, and reading errors off the wire."""

from __future__ import annotations

import pytest

from interlock import errors as e
from interlock.http._status import HTTP_STATUS, http_status

EXPECTED_STATUS: list[tuple[type[e.InterlockError], str, int]] = [
    (e.InterlockError, "INTERNAL", 500),
    (e.InvalidArgumentError, "INVALID_ARGUMENT", 400),
    (e.ResumeError, "INVALID_ARGUMENT", 400),
    (e.NotFoundError, "NOT_FOUND", 404),
    (e.SnapshotNotFoundError, "NOT_FOUND", 404),
    (e.FailedPreconditionError, "FAILED_PRECONDITION", 400),
    (e.UsageError, "FAILED_PRECONDITION", 400),
    (e.AbortedError, "ABORTED", 409),
    (e.ClaimConflictError, "ABORTED", 409),
    (e.CancelledError, "CANCELLED", 499),
    (e.DeadlineExceededError, "DEADLINE_EXCEEDED", 504),
    (e.AlreadyExistsError, "ALREADY_EXISTS", 409),
    (e.PermissionDeniedError, "PERMISSION_DENIED", 403),
    (e.UnauthenticatedError, "UNAUTHENTICATED", 401),
    (e.ResourceExhaustedError, "RESOURCE_EXHAUSTED", 429),
    (e.MaxTurnsExceededError, "RESOURCE_EXHAUSTED", 429),
    (e.UnimplementedError, "UNIMPLEMENTED", 501),
    (e.UnavailableError, "UNAVAILABLE", 503),
    (e.DataLossError, "DATA_LOSS", 500),
    (e.InternalError, "INTERNAL", 500),
    (e.ModelError, "INTERNAL", 500),
]


@pytest.mark.parametrize(("cls", "status", "http"), EXPECTED_STATUS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_status_and_http_status(cls: type[e.InterlockError], status: str, http: int) -> None:
    err = cls("something happened")
    assert err.status == status
    assert http_status(err) == http
    assert err.message == "something happened"
    assert str(err) == f"{status}: something happened"
    assert e.status_of(err) == status


def test_errors_with_a_tool_name() -> None:
    for cls, status in ((e.ToolInputError, "INVALID_ARGUMENT"), (e.ToolOutputError, "INVALID_ARGUMENT")):
        err = cls("bad", tool="transfer", details=[{"loc": ["amount"]}])
        assert err.tool == "transfer"
        assert err.status == status
        assert err.details == [{"loc": ["amount"]}]
    tool_error = e.ToolError("boom", tool="explode")
    assert tool_error.tool == "explode"
    assert tool_error.status == "INTERNAL"
    assert http_status(tool_error) == 500


def test_claim_conflict_names_the_winner() -> None:
    assert e.ClaimConflictError("taken", winner="snap-1").details == {"winner": "snap-1"}
    assert e.ClaimConflictError("taken").details is None
    assert e.ClaimConflictError("taken", winner="snap-1").winner == "snap-1"


def test_explicit_status_overrides_the_default() -> None:
    err = e.InvalidArgumentError("too far", status="OUT_OF_RANGE")
    assert err.status == "OUT_OF_RANGE"
    assert http_status(err) == 400
    assert http_status(e.InterlockError("?", status="SOMETHING_NEW")) == 500


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (e.InvalidArgumentError, ValueError),
        (e.ToolInputError, ValueError),
        (e.ResumeError, ValueError),
        (e.NotFoundError, LookupError),
        (e.SnapshotNotFoundError, LookupError),
        (e.UsageError, RuntimeError),
        (e.DeadlineExceededError, TimeoutError),
        (e.PermissionDeniedError, PermissionError),
        (e.UnimplementedError, NotImplementedError),
    ],
)
def test_catchable_by_builtin_types(cls: type[e.InterlockError], builtin: type[Exception]) -> None:
    kwargs = {"tool": "t"} if cls is e.ToolInputError else {}
    with pytest.raises(builtin):
        raise cls("x", **kwargs)
    assert issubclass(cls, e.InterlockError)


def test_catchable_by_family() -> None:
    assert issubclass(e.ToolInputError, e.InvalidArgumentError)
    assert issubclass(e.ToolOutputError, e.InvalidArgumentError)
    assert issubclass(e.ResumeError, e.InvalidArgumentError)
    assert issubclass(e.ToolError, e.InternalError)
    assert issubclass(e.ModelError, e.InternalError)
    assert issubclass(e.MaxTurnsExceededError, e.ResourceExhaustedError)
    assert not issubclass(e.FailedPreconditionError, ValueError)
    assert not issubclass(e.NotFoundError, ValueError)


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        ("INVALID_ARGUMENT", e.InvalidArgumentError),
        ("OUT_OF_RANGE", e.InvalidArgumentError),
        ("NOT_FOUND", e.NotFoundError),
        ("FAILED_PRECONDITION", e.FailedPreconditionError),
        ("ABORTED", e.AbortedError),
        ("CANCELLED", e.CancelledError),
        ("DEADLINE_EXCEEDED", e.DeadlineExceededError),
        ("ALREADY_EXISTS", e.AlreadyExistsError),
        ("PERMISSION_DENIED", e.PermissionDeniedError),
        ("UNAUTHENTICATED", e.UnauthenticatedError),
        ("RESOURCE_EXHAUSTED", e.ResourceExhaustedError),
        ("UNIMPLEMENTED", e.UnimplementedError),
        ("UNAVAILABLE", e.UnavailableError),
        ("DATA_LOSS", e.DataLossError),
        ("INTERNAL", e.InternalError),
        ("UNKNOWN", e.InternalError),
        ("SOMETHING_NEW", e.InternalError),
    ],
)
def test_error_from_status(status: str, cls: type[e.InterlockError]) -> None:
    err = e.error_from_status(status, "from the wire", details={"k": 1})
    assert type(err) is cls
    assert err.status == status, "the wire status is kept even when the class is a fallback"
    assert err.message == "from the wire"
    assert err.details == {"k": 1}


def test_error_from_status_without_a_status_is_unknown() -> None:
    err = e.error_from_status(None, "no status")
    assert isinstance(err, e.InternalError)
    assert err.status == "UNKNOWN"
    assert http_status(err) == 500


def test_status_of_a_plain_exception_is_internal() -> None:
    assert e.status_of(ValueError("x")) == "INTERNAL"
    assert e.status_of(KeyError("x")) == "INTERNAL"


def test_interrupt_is_a_signal_not_an_error() -> None:
    signal = e.Interrupt({"reason": "approve"})
    assert not isinstance(signal, e.InterlockError)
    assert isinstance(signal, Exception)
    assert signal.data == {"reason": "approve"}
    assert e.Interrupt().data is None
    with pytest.raises(e.Interrupt):
        try:
            raise signal
        except e.InterlockError:  # pragma: no cover - must not catch it
            pytest.fail("an InterlockError handler caught an Interrupt")


def test_http_status_table_covers_every_canonical_code() -> None:
    assert set(HTTP_STATUS) == {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
    }
