"""Fixtures for the database fault tests: throwaway servers of the test's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.servers import ThrowawayMariaDB, ThrowawayPostgres


@pytest.fixture
def own_postgres() -> Iterator[ThrowawayPostgres]:
    """A PostgreSQL server for this test alone, which it may stop and start."""
    ThrowawayPostgres.require()
    server = ThrowawayPostgres().create()
    yield server
    server.destroy()


@pytest.fixture
def own_mariadb() -> Iterator[ThrowawayMariaDB]:
    """A MariaDB server for this test alone, which it may stop and start."""
    ThrowawayMariaDB.require()
    server = ThrowawayMariaDB().create()
    yield server
    server.destroy()
