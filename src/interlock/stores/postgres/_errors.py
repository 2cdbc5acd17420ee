"""PostgreSQL failures as interlock errors: transient ones UNAVAILABLE, the others what to fix."""

from __future__ import annotations

from psycopg import Error as PgError
from psycopg import OperationalError, ProgrammingError, conninfo, errors

from ...errors import (
    FailedPreconditionError,
    InterlockError,
    InvalidArgumentError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)


def pg_error(exc: PgError, where: str) -> InterlockError:
    """The interlock error for a PostgreSQL failure of the store ``where``."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, errors.UndefinedTable | errors.UndefinedColumn | errors.WrongObjectType):
        return FailedPreconditionError(
            f"{where} lacks interlock's tables or columns ({text}); run `interlock db upgrade --store URL`"
        )
    if isinstance(exc, errors.ReadOnlySqlTransaction | errors.InsufficientPrivilege):
        return PermissionDeniedError(
            f"{where} cannot be written ({text}); grant this role write access or use the primary"
        )
    if isinstance(exc, errors.DiskFull | errors.OutOfMemory | errors.ProgramLimitExceeded):
        return ResourceExhaustedError(f"{where} is out of room ({text})")
    if isinstance(exc, errors.DataError | errors.CharacterNotInRepertoire):
        return InvalidArgumentError(
            f"{where} cannot store this value ({text}); ids and tenants cannot hold NUL characters"
        )
    if isinstance(exc, errors.InvalidAuthorizationSpecification | errors.InvalidPassword) or (
        isinstance(exc, OperationalError) and "authentication failed" in text
    ):
        return UnauthenticatedError(f"{where} refused the login ({text}); check the user and password in the URL")
    if isinstance(exc, OperationalError) and "does not exist" in text:
        return FailedPreconditionError(f"{where} cannot be opened ({text}); create the database first (createdb)")
    if isinstance(exc, OperationalError | errors.SerializationFailure | errors.DeadlockDetected):
        return UnavailableError(f"{where} is unreachable or busy ({text}); retrying may help")
    return FailedPreconditionError(f"{where} failed ({text})")


def redacted(dsn: str) -> str:
    """The DSN for a message: its password replaced."""
    try:
        info = conninfo.conninfo_to_dict(dsn)
    except ProgrammingError:
        return "postgresql://..."
    if "password" not in info:
        return dsn
    info["password"] = "***"
    return conninfo.make_conninfo(**{k: str(v) for k, v in info.items() if v is not None})
