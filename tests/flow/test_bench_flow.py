"""benchmarks/flow.py, run tiny so it cannot rot: every configuration drains its jobs
exactly once on both databases and the table is printed. No figure is asserted."""

from __future__ import annotations

import pytest

from benchmarks import flow
from tests.conftest import PG_URL, require_postgres


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_every_configuration_runs_and_verifies_its_jobs(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if backend == "postgresql":
        require_postgres()
    argv = ["--backends", backend, "--jobs", "250", "--rounds", "5", "--runs", "1",
            "--backlog", "300", "--pg", PG_URL]  # fmt: skip
    assert flow.main(argv) == 0
    out = capsys.readouterr().out
    for config in flow.CONFIGS:
        assert f"| {backend} | {config} |" in out
    assert "claim of 100 behind 300 pending" in out
