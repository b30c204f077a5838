from __future__ import annotations

import conveyor
from conveyor import errors


def test_every_error_shares_one_root() -> None:
    for name in (
        "JobNotFound",
        "StaleClaim",
        "InvalidTransition",
        "DuplicateJob",
        "InvalidArgument",
        "ConfigurationError",
        "DatabaseError",
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
