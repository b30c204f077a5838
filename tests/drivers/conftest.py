"""The driver suite also runs on MySQL through mysqlclient (``?client=mysqlclient``):
the sync backend's other client library meets every operation here."""

from __future__ import annotations

import pytest

from tests.conftest import BACKENDS


@pytest.fixture(params=[*BACKENDS, "mysqlclient"])
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)
