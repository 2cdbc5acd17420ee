"""Errors and signals.

Every error carries a canonical status (the Google RPC code names Genkit uses on the wire)
and is catchable by type. The hierarchy::

    InterlockError                      root of every run failure; .status, .message, .details
    ├── InvalidArgumentError (ValueError)        INVALID_ARGUMENT
    │   ├── ToolInputError                        model input failed a tool's input schema
    │   ├── ToolOutputError                       a respond output failed a tool's output schema
    │   └── ResumeError                           a resume payload does not match the pending turn
    ├── NotFoundError (LookupError)               NOT_FOUND
    │   └── SnapshotNotFoundError
    ├── FailedPreconditionError                   FAILED_PRECONDITION
    │   └── UsageError                            API misuse (state sent to a store agent, ...)
    ├── AbortedError                              ABORTED (a lost race, e.g. an interrupt already claimed)
    │   └── ClaimConflictError
    ├── CancelledError                            CANCELLED
    ├── DeadlineExceededError (TimeoutError)      DEADLINE_EXCEEDED
    ├── AlreadyExistsError                        ALREADY_EXISTS
    ├── PermissionDeniedError                     PERMISSION_DENIED
    ├── UnauthenticatedError                      UNAUTHENTICATED
    ├── ResourceExhaustedError                    RESOURCE_EXHAUSTED
    │   └── MaxTurnsExceededError
    ├── UnimplementedError                        UNIMPLEMENTED
    ├── UnavailableError                          UNAVAILABLE
    ├── DataLossError                             DATA_LOSS
    └── InternalError                             INTERNAL (and UNKNOWN)
        ├── ToolError                             a tool body raised
        └── ModelError                            a model call failed

Signals are not errors: :class:`Interrupt` is raised by a tool to pause the turn and is
never a subclass of :class:`InterlockError`.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "CancelledError",
    "ClaimConflictError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InterlockError",
    "InternalError",
    "Interrupt",
    "InvalidArgumentError",
    "MaxTurnsExceededError",
    "ModelError",
    "NotFoundError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "ResumeError",
    "SnapshotNotFoundError",
    "ToolError",
    "ToolInputError",
    "ToolOutputError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UsageError",
    "error_class",
    "error_from_status",
    "status_of",
]


class InterlockError(Exception):
    """Root of every interlock run failure.

    Attributes:
        status: the canonical status name, e.g. ``"INVALID_ARGUMENT"``.
        message: the human-readable message, without a status prefix.
        details: optional JSON-serialisable details.
    """

    default_status: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str, *, details: Any = None, status: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.status: str = status or self.default_status

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"


class InvalidArgumentError(InterlockError, ValueError):
    """The caller sent something invalid (INVALID_ARGUMENT)."""

    default_status = "INVALID_ARGUMENT"


class ToolInputError(InvalidArgumentError):
    """Input for a tool failed the tool's input schema; the tool did not run."""

    def __init__(self, message: str, *, tool: str, details: Any = None) -> None:
        super().__init__(message, details=details)
        self.tool = tool


class ToolOutputError(InvalidArgumentError):
    """An output supplied for a tool (a respond) failed the tool's output schema."""

    def __init__(self, message: str, *, tool: str, details: Any = None) -> None:
        super().__init__(message, details=details)
        self.tool = tool


class ResumeError(InvalidArgumentError):
    """A resume payload does not match the pending tool requests in history."""


class NotFoundError(InterlockError, LookupError):
    """Something named by the caller does not exist (NOT_FOUND)."""

    default_status = "NOT_FOUND"


class SnapshotNotFoundError(NotFoundError):
    """No snapshot with the given id (or for the given session) is visible to the caller."""


class FailedPreconditionError(InterlockError):
    """The system is not in a state where the operation can run (FAILED_PRECONDITION)."""

    default_status = "FAILED_PRECONDITION"


class UsageError(FailedPreconditionError, RuntimeError):
    """The API was used in a way it does not support."""


class AbortedError(InterlockError):
    """The operation lost a race with a concurrent one (ABORTED)."""

    default_status = "ABORTED"


class ClaimConflictError(AbortedError):
    """The interrupted snapshot was already claimed by another resume.

    Attributes:
        winner: the id of the turn (snapshot) that claimed it first.
    """

    def __init__(self, message: str, *, winner: str | None = None) -> None:
        super().__init__(message, details={"winner": winner} if winner else None)
        self.winner = winner


class CancelledError(InterlockError):
    """The operation was cancelled by its caller (CANCELLED)."""

    default_status = "CANCELLED"


class DeadlineExceededError(InterlockError, TimeoutError):
    """The operation ran out of time (DEADLINE_EXCEEDED)."""

    default_status = "DEADLINE_EXCEEDED"


class AlreadyExistsError(InterlockError):
    """The thing to create already exists (ALREADY_EXISTS)."""

    default_status = "ALREADY_EXISTS"


class PermissionDeniedError(InterlockError, PermissionError):
    """The caller may not do this (PERMISSION_DENIED)."""

    default_status = "PERMISSION_DENIED"


class UnauthenticatedError(InterlockError):
    """The caller is not authenticated (UNAUTHENTICATED)."""

    default_status = "UNAUTHENTICATED"


class ResourceExhaustedError(InterlockError):
    """A quota or limit was reached (RESOURCE_EXHAUSTED)."""

    default_status = "RESOURCE_EXHAUSTED"


class MaxTurnsExceededError(ResourceExhaustedError):
    """The tool loop reached its ``max_turns`` limit."""


class UnimplementedError(InterlockError, NotImplementedError):
    """The operation is not supported here (UNIMPLEMENTED)."""

    default_status = "UNIMPLEMENTED"


class UnavailableError(InterlockError):
    """A dependency is unavailable; retrying may help (UNAVAILABLE)."""

    default_status = "UNAVAILABLE"


class DataLossError(InterlockError):
    """Stored data is unreadable or corrupt (DATA_LOSS)."""

    default_status = "DATA_LOSS"


class InternalError(InterlockError):
    """An unexpected failure (INTERNAL)."""

    default_status = "INTERNAL"


class ToolError(InternalError):
    """A tool body raised an exception that is not an :class:`InterlockError`."""

    def __init__(self, message: str, *, tool: str, details: Any = None) -> None:
        super().__init__(message, details=details)
        self.tool = tool


class ModelError(InternalError):
    """A model call failed."""


_BY_STATUS: dict[str, type[InterlockError]] = {
    "INVALID_ARGUMENT": InvalidArgumentError,
    "OUT_OF_RANGE": InvalidArgumentError,
    "NOT_FOUND": NotFoundError,
    "FAILED_PRECONDITION": FailedPreconditionError,
    "ABORTED": AbortedError,
    "CANCELLED": CancelledError,
    "DEADLINE_EXCEEDED": DeadlineExceededError,
    "ALREADY_EXISTS": AlreadyExistsError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "UNAUTHENTICATED": UnauthenticatedError,
    "RESOURCE_EXHAUSTED": ResourceExhaustedError,
    "UNIMPLEMENTED": UnimplementedError,
    "UNAVAILABLE": UnavailableError,
    "DATA_LOSS": DataLossError,
}


def error_class(status: str | None) -> type[InterlockError]:
    """The error class of a canonical status (:class:`InternalError` for ``INTERNAL``, ``UNKNOWN`` and unknown ones)."""
    return _BY_STATUS.get(status or "UNKNOWN", InternalError)


def error_from_status(status: str | None, message: str, *, details: Any = None) -> InterlockError:
    """Build the error class that matches a canonical status (used when reading errors off the wire)."""
    status = status or "UNKNOWN"
    return error_class(status)(message, details=details, status=status)


def status_of(exc: BaseException) -> str:
    """The canonical status of any exception: its own for interlock errors, else ``INTERNAL``."""
    if isinstance(exc, InterlockError):
        return exc.status
    return "INTERNAL"


class Interrupt(Exception):
    """Raised inside a tool to pause the turn for a person or another system.

    It is a control-flow signal, not an error: the tool loop catches it, marks the tool
    request with ``metadata.interrupt`` (the ``data``, or ``True`` when there is none)
    and ends the turn with finish reason ``interrupted``. Prefer ``ctx.interrupt(data)``.
    """

    def __init__(
        self,
        data: Any = None,
        *,
        expires_in: float | None = None,
        on_expire: Any = None,
        policy: Any = None,
        warn_before: float | None = None,
    ) -> None:
        super().__init__(data)
        self.data = data
        self.warn_before = warn_before
        """Seconds before the deadline an ``interrupt.expiring`` notification goes out; ``None``: the tool's."""
        self.policy = policy
        """The :class:`~interlock.interrupts.AnswerPolicy` of this interrupt; ``None``: the tool's default."""
        self.expires_in = expires_in
        """Seconds until this interrupt's deadline (:mod:`interlock.tools._expiry`); ``None``: the tool's default."""
        self.on_expire = on_expire
        """The :class:`~interlock.tools.OnExpire` policy of that deadline; ``None``: the tool's default."""
