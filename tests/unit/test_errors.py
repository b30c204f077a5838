from __future__ import annotations

import httpx
import pytest

import conveyor
from conveyor import errors
from conveyor.client import answer


def test_every_error_shares_one_root() -> None:
    for name in (
        "JobNotFound",
        "StaleClaim",
        "InvalidTransition",
        "DuplicateJob",
        "InvalidArgument",
        "ConfigurationError",
        "DatabaseError",
        "DatabaseUnavailable",
        "StorageFull",
        "StorageReadOnly",
    ):
        cls = getattr(conveyor, name)
        assert issubclass(cls, conveyor.ConveyorError)
        assert cls().message, f"{name} has no default message"
    assert issubclass(conveyor.InvalidArgument, ValueError)
    assert issubclass(conveyor.ConfigurationError, ValueError)


def test_control_exceptions_are_not_errors() -> None:
    assert not issubclass(conveyor.Retry, conveyor.ConveyorError)
    assert conveyor.Retry(delay=3).delay == 3
    assert not issubclass(conveyor.Terminal, errors.ConveyorError)


def test_status_is_a_str_enum() -> None:
    assert conveyor.Status.PENDING == "pending"
    assert conveyor.Status("failed").is_final and conveyor.Status.RUNNING.is_active


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("database_unavailable", conveyor.DatabaseUnavailable),
        ("storage_full", conveyor.StorageFull),
        ("storage_read_only", conveyor.StorageReadOnly),
    ],
)
def test_a_remote_queue_raises_the_database_fault_the_server_names(
    code: str, cls: type[conveyor.DatabaseError]
) -> None:
    """The server's 503 codes come back as the library's classes (each a DatabaseError,
    so code that catches that goes on working)."""
    body = {"error": {"code": code, "message": "the database is full; try again later"}}
    response = httpx.Response(503, json=body, headers={"Retry-After": "5"})
    with pytest.raises(cls) as raised:
        answer(response, "POST", "/api/jobs")
    assert isinstance(raised.value, conveyor.DatabaseError)
    assert raised.value.code == code
